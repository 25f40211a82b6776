"""The whole preflight for one bank version: get the fingerprint index, scan, write the verdict.

The index is read from `leakage.index_path` or `RunLayout.fingerprint_index`; when absent it is built from
the held-out side's export (`bat.benchmark.fingerprint_entries`) and saved there for later scans.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from bat.leakage.bankscan import content_digest, manifest_digest, scan_bank_dir
from bat.leakage.heldout import collect_heldout_entries
from bat.leakage.index import FingerprintIndex, build_index, load_index, read_index_meta, save_index
from bat.leakage.report import LeakageReport, read_report, unscanned_report, write_verdict
from bat.leakage.scanner import Scanner
from bat.state.bank_layout import BankVersionLayout
from bat.state.layout import RunLayout

if TYPE_CHECKING:
    from bat.benchmark.secret import HeldoutSecret
    from bat.config.root import BatConfig


class LeakageRejected(RuntimeError):
    """A bank version failed the preflight: admission stops; the message counts hits by kind."""

    def __init__(self, report: LeakageReport, report_path: Path) -> None:
        hits = {kind: n for kind, n in report.hits_by_kind.items() if n}
        super().__init__(
            f"bank {report.bank_version} rejected by the leakage preflight: {report.rows_flagged} of "
            f"{report.rows_scanned} rows flagged, hits by kind {hits}; findings in {report_path}"
        )
        self.report = report
        self.report_path = report_path


def index_dir(layout: RunLayout, config: BatConfig) -> Path:
    """Where the fingerprint index lives: `leakage.index_path` or `layout.fingerprint_index`."""
    return Path(config.leakage.index_path) if config.leakage.index_path else layout.fingerprint_index


def benchmark_origin(config: BatConfig, secret: HeldoutSecret) -> dict[str, str]:
    """Origin label of an index exported from the built-in benchmark under `config.benchmark` and `secret` (named by
    its fingerprint, never its key)."""
    text = json.dumps(config.benchmark.model_dump(mode="json"), sort_keys=True)
    return {
        "source": "bat.benchmark.fingerprint_entries",
        "benchmark_config": "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "heldout_secret": secret.fingerprint,
    }


def export_index(layout: RunLayout, config: BatConfig) -> FingerprintIndex:
    """Held-out side, at run start (the driver, never a guarded phase): load the index at `leakage.index_path` (must
    exist), or the run's own index at `layout.fingerprint_index` when it was exported under the current benchmark
    config and held-out secret; otherwise build it from the benchmark's held-out export and save it there (a changed
    held-out suite gets a fresh index). Reads the run's held-out secret."""
    path = index_dir(layout, config)
    if config.leakage.index_path:
        if read_index_meta(path) is None:
            raise FileNotFoundError(f"leakage.index_path={path} has no INDEX.json; export the index there first")
        return load_index(path, config.leakage)
    from bat.benchmark.secret import run_secret

    secret = run_secret(layout)
    origin = benchmark_origin(config, secret)
    meta = read_index_meta(path)
    if meta is not None and meta.get("origin") in (origin, {}):
        return load_index(path, config.leakage)
    index = build_index(collect_heldout_entries(config, secret), config.leakage)
    index.origin = origin
    save_index(index, path)
    return index


def ensure_index(layout: RunLayout, config: BatConfig) -> FingerprintIndex:
    """Training side (synthesis, scan): the index at `leakage.index_path` or the run's exported index, as it is;
    exported first when the run has none yet (outside a guarded phase: in a phase the held-out guard stops that,
    since the run's start exports it). Never checks freshness: `export_index` does, at every run start."""
    path = index_dir(layout, config)
    if read_index_meta(path) is not None:
        return load_index(path, config.leakage)
    return export_index(layout, config)


def scan_and_admit(
    layout: RunLayout, version: int, config: BatConfig, index: FingerprintIndex | None = None
) -> LeakageReport:
    """Scan bank `version` and write leakage.json + ADMITTED/REJECTED.json; returns the report.

    A version already scanned with the same index, the same files (content digest) and the same settings is
    not rescanned.
    """
    bank_dir = layout.bank(version)
    if not bank_dir.is_dir():
        raise FileNotFoundError(f"bank v{version:04d} not found; versions on disk: {layout.bank_versions()}")
    if not config.leakage.enabled:
        report = unscanned_report(bank_dir.name, config.leakage)
        write_verdict(bank_dir, report)
        return report
    index = index if index is not None else ensure_index(layout, config)
    previous = read_report(bank_dir)
    if previous is not None and _same_inputs(previous, index, bank_dir, config):
        return previous
    report = scan_bank_dir(bank_dir, Scanner(index))
    write_verdict(bank_dir, report)
    return report


def _same_inputs(report: LeakageReport, index: FingerprintIndex, bank_dir: Path, config: BatConfig) -> bool:
    return (
        report.scanned
        and report.index_digest == index.digest
        and report.manifest_digest == manifest_digest(bank_dir)
        and report.content_digest == content_digest(bank_dir, config.leakage.skip_files)
        and report.settings == config.leakage.model_dump(mode="json")
        and _verdict_marker(BankVersionLayout(Path(bank_dir)), report.verdict).exists()
    )


def _verdict_marker(files: BankVersionLayout, verdict: str) -> Path:
    return files.admitted_marker if verdict == "admitted" else files.rejected_marker


def report_path(layout: RunLayout, version: int) -> Path:
    """Path of a version's leakage.json."""
    return layout.bank_version(version).leakage_report
