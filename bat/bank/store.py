"""Versioned immutable bank store: write `bank/vNNNN/` once (build beside it, rename in), read it back.

A version is complete when MANIFEST.json exists (written last inside the build directory, before the
rename). Files are made read-only; the leakage scan adds `leakage.json` and `ADMITTED` beside them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from bat.schemas.bank import BankIndex, BankManifest, BankRow, PracticeTask, SftRow, Trajectory
from bat.state.atomic import atomic_write_json, plain_temp_dir, read_json
from bat.state.bank_layout import MANIFEST_NAME, SCAN_OUTPUTS, BankVersionLayout
from bat.state.digest import sha256_file
from bat.state.jsonl import read_jsonl
from bat.state.layout import RunLayout

NOT_DIGESTED = SCAN_OUTPUTS | {MANIFEST_NAME}


class BankNotFoundError(FileNotFoundError):
    """No (admitted) bank version where one was asked for."""


def version_digests(directory: Path) -> dict[str, str]:
    """sha256 of every file of a version (relative path -> digest), excluding manifest and scan verdicts."""
    directory = Path(directory)
    out: dict[str, str] = {}
    for path in sorted(directory.rglob("*")):
        rel = path.relative_to(directory).as_posix()
        if path.is_file() and rel not in NOT_DIGESTED:
            out[rel] = "sha256:" + sha256_file(path)
    return out


@dataclass(frozen=True)
class BankVersion:
    """Read access to one complete bank version directory."""

    path: Path
    version: int

    @property
    def files(self) -> BankVersionLayout:
        return BankVersionLayout(self.path)

    def manifest(self) -> BankManifest:
        return BankManifest.model_validate(read_json(self.files.manifest))

    def tasks(self) -> list[PracticeTask]:
        return read_jsonl(self.files.tasks, PracticeTask)

    def trajectories(self) -> list[Trajectory]:
        return read_jsonl(self.files.trajectories, Trajectory)

    @cached_property
    def _trajectories_by_id(self) -> dict[str, Trajectory]:
        """Teacher trajectories keyed by id, read once per BankVersion."""
        return {t.trajectory_id: t for t in self.trajectories()}

    def _lookup(self, records: dict[str, Any], key: str, what: str) -> Any:
        """`records[key]`, or KeyError naming the key, this version and how many records it holds."""
        if key not in records:
            raise KeyError(f"{what} {key!r} not in bank v{self.version:04d} (it holds {len(records)})")
        return records[key]

    def trajectory(self, trajectory_id: str) -> Trajectory:
        """The teacher trajectory `trajectory_id` (a row's `provenance.trajectory_id`); unknown ids raise KeyError."""
        return self._lookup(self._trajectories_by_id, trajectory_id, "trajectory")

    def rows(self) -> list[BankRow]:
        return list(self._rows_by_id.values())

    @cached_property
    def _rows_by_id(self) -> dict[str, BankRow]:
        """RL rows keyed by state_id, read once per BankVersion (a version never changes)."""
        return {row.state_id: row for row in read_jsonl(self.files.rl_rows, BankRow)}

    def row(self, state_id: str) -> BankRow:
        """The RL row `state_id`; unknown ids raise KeyError."""
        return self._lookup(self._rows_by_id, state_id, "state_id")

    def sft_rows(self, split: str = "train") -> list[SftRow]:
        return read_jsonl(self.files.sft_split(split), SftRow)

    def sft_rejected(self) -> dict[str, Any]:
        return read_json(self.files.sft_rejected)

    def index(self) -> BankIndex:
        return BankIndex.model_validate(read_json(self.files.rl_index))

    def state_dir(self, state_id: str) -> Path:
        path = self.files.state(state_id)
        if not path.is_dir():
            raise KeyError(f"no state package {state_id!r} in bank v{self.version:04d}")
        return path

    @property
    def admitted(self) -> bool:
        return self.files.is_admitted()

    def verify(self) -> None:
        """Recompute every file digest and compare with the manifest; raises ValueError listing differences."""
        recorded = self.manifest().digests
        actual = version_digests(self.path)
        if recorded != actual:
            changed = sorted(k for k in set(recorded) | set(actual) if recorded.get(k) != actual.get(k))
            raise ValueError(f"bank v{self.version:04d} differs from its manifest in: {changed[:20]}")


def complete_versions(layout: RunLayout) -> list[int]:
    """Versions on disk that have a MANIFEST.json, ascending."""
    return layout.complete_bank_versions()


def open_bank(layout: RunLayout, version: int | None = None, *, admitted_only: bool = True) -> BankVersion:
    """Open `version`, or the newest admitted one (newest complete one when `admitted_only` is False)."""
    complete = complete_versions(layout)
    if version is None:
        candidates = [v for v in complete if layout.bank_version(v).is_admitted()] if admitted_only else complete
        if not candidates:
            kind = "admitted " if admitted_only else ""
            raise BankNotFoundError(
                f"no {kind}bank version under {layout.bank_root}; versions on disk: {layout.bank_versions()} "
                f"(admitted: {layout.admitted_bank_versions()}); run `bat bank synthesize` then `bat bank scan`"
            )
        version = candidates[-1]
    if version not in complete:
        raise BankNotFoundError(f"bank v{version:04d} is not a complete version; complete versions: {complete}")
    bank = BankVersion(layout.bank(version), version)
    if admitted_only and not bank.admitted:
        raise BankNotFoundError(
            f"bank v{version:04d} is not admitted by the leakage scan; admitted: {layout.admitted_bank_versions()}"
        )
    return bank


def find_by_fingerprint(layout: RunLayout, fingerprint: str) -> BankVersion | None:
    """The newest complete version whose manifest carries `fingerprint` (synthesis already done), else None."""
    for version in reversed(complete_versions(layout)):
        bank = BankVersion(layout.bank(version), version)
        if bank.manifest().fingerprint == fingerprint:
            return bank
    return None


def _read_only(directory: Path) -> None:
    for path in directory.rglob("*"):
        if path.is_file():
            path.chmod(0o444)


def write_version(
    layout: RunLayout,
    fill: Callable[[Path], dict[str, Any]],
    manifest_fields: dict[str, Any],
    *,
    resume_key: str | None = None,
) -> BankVersion:
    """Build a new version: `fill(build_dir)` writes every file and returns the counts; the manifest
    (digests of all files) is written last, files made read-only, and the directory renamed to the next
    free `vNNNN` (never replacing an existing version).

    Without `resume_key` the build directory is a fresh temp dir removed on any error. With it, the build
    directory is `bank/.build-<resume_key>` and is kept when the build fails or is killed, so a rerun of the
    same synthesis resumes from what `fill` finished there."""
    layout.bank_root.mkdir(parents=True, exist_ok=True)
    if resume_key is None:
        build = plain_temp_dir(layout.bank_root, prefix=".build-")
    else:
        build = layout.bank_root / f".build-{resume_key}"
        build.mkdir(exist_ok=True)
    try:
        counts = fill(build)
        digests = version_digests(build)
        for attempt in range(100):
            version = (layout.bank_versions() or [0])[-1] + 1 + attempt
            manifest = BankManifest(version=version, counts=counts, digests=digests, **manifest_fields)
            atomic_write_json(BankVersionLayout(build).manifest, manifest.model_dump(mode="json"))
            _read_only(build)
            try:
                os.rename(build, layout.bank(version))
            except OSError:
                continue
            return BankVersion(layout.bank(version), version)
        raise RuntimeError(f"could not claim a free bank version under {layout.bank_root}")
    except BaseException:
        if resume_key is None:
            shutil.rmtree(build, ignore_errors=True)
        raise
