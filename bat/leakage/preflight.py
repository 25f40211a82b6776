"""The whole preflight for one bank version: get the fingerprint index, scan, write the verdict.

The index is read from `leakage.index_path` or `RunLayout.fingerprint_index`; when absent it is built from
the held-out side's export (`bat.benchmark.fingerprint_entries`) and saved there for later scans.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bat.leakage.bankscan import manifest_digest, scan_bank_dir
from bat.leakage.heldout import collect_heldout_entries
from bat.leakage.index import FingerprintIndex, build_index, load_index, save_index
from bat.leakage.report import LeakageReport, read_report, unscanned_report, write_verdict, REPORT_NAME
from bat.leakage.scanner import Scanner
from bat.state.layout import RunLayout

if TYPE_CHECKING:
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


def index_dir(layout: RunLayout, config: "BatConfig") -> Path:
    """Where the fingerprint index lives: `leakage.index_path` or `layout.fingerprint_index`."""
    return Path(config.leakage.index_path) if config.leakage.index_path else layout.fingerprint_index


def ensure_index(layout: RunLayout, config: "BatConfig") -> FingerprintIndex:
    """Load the exported index, or build it from the benchmark's held-out export and save it."""
    path = index_dir(layout, config)
    if (path / "INDEX.json").is_file():
        return load_index(path, config.leakage)
    if config.leakage.index_path:
        raise FileNotFoundError(f"leakage.index_path={path} has no INDEX.json; export the index there first")
    index = build_index(collect_heldout_entries(config), config.leakage)
    save_index(index, path)
    return index


def scan_and_admit(
    layout: RunLayout, version: int, config: "BatConfig", index: FingerprintIndex | None = None
) -> LeakageReport:
    """Scan bank `version` and write leakage.json + ADMITTED/REJECTED.json; returns the report.

    A version already scanned with the same index digest, manifest digest and settings is not rescanned.
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


def _same_inputs(report: LeakageReport, index: FingerprintIndex, bank_dir: Path, config: "BatConfig") -> bool:
    return (
        report.scanned
        and report.index_digest == index.digest
        and report.manifest_digest == manifest_digest(bank_dir)
        and report.settings == config.leakage.model_dump(mode="json")
        and (bank_dir / ("ADMITTED" if report.verdict == "admitted" else "REJECTED.json")).exists()
    )


def report_path(layout: RunLayout, version: int) -> Path:
    """Path of a version's leakage.json."""
    return layout.bank(version) / REPORT_NAME
