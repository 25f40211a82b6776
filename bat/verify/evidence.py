"""Trusted view of a rollout's final workspace: only files an execution record accounts for.

A file counts as evidence only if its bytes are what the environment produced: it was in the workspace
right after reset, or a recorded tool call wrote exactly these bytes and nothing changed them since.
Files that are tool-owned (e.g. `outputs/` by `run_model`) count only when their owning tool wrote them.
Everything else (files planted after the fact, files edited outside a tool, owned files written by
another tool) is left out of the view the grader sees, so it cannot raise a reward.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bat.rollout.workspace import sha256_file, snapshot
from bat.schemas.rollout import TurnRecord


@dataclass
class TrustReport:
    """What the trusted view kept and why the rest was dropped."""

    kept: list[str] = field(default_factory=list)
    untracked: list[str] = field(default_factory=list)
    """Present in the evidence but never produced by reset or a tool call."""
    modified: list[str] = field(default_factory=list)
    """Bytes differ from what the last recorded write produced."""
    wrong_owner: list[str] = field(default_factory=list)
    """Tool-owned path last written by a different tool."""
    missing: list[str] = field(default_factory=list)
    """Recorded but absent from the evidence copy."""

    @property
    def dropped(self) -> list[str]:
        return sorted(self.untracked + self.modified + self.wrong_owner)


def _owner_of(path: str, owners: Mapping[str, Sequence[str]]) -> Sequence[str] | None:
    for prefix, tools in owners.items():
        if path == prefix or (prefix.endswith("/") and path.startswith(prefix)):
            return tools
    return None


def expected_files(initial: Mapping[str, str], turns: Sequence[TurnRecord]) -> dict[str, tuple[str, str | None]]:
    """path -> (sha256, writer tool or None for reset) after replaying every recorded write/delete in order."""
    state: dict[str, tuple[str, str | None]] = {p: (d, None) for p, d in initial.items()}
    for turn in turns:
        tool = (turn.call or {}).get("name") or "<invalid>"
        for path in turn.files_deleted:
            state.pop(path, None)
        for path, digest in turn.files_written.items():
            state[path] = (digest, tool)
    return state


def trusted_view(
    evidence_dir: Path,
    initial: Mapping[str, str],
    turns: Sequence[TurnRecord],
    dest: Path,
    owners: Mapping[str, Sequence[str]] | None = None,
) -> TrustReport:
    """Copy into `dest` only the files of `evidence_dir` the records account for; returns the report."""
    owners = owners or {}
    expected = expected_files(initial, turns)
    present = snapshot(evidence_dir)
    report = TrustReport(missing=sorted(set(expected) - set(present)))
    dest.mkdir(parents=True, exist_ok=True)
    for rel in sorted(present):
        if rel not in expected:
            report.untracked.append(rel)
            continue
        digest, writer = expected[rel]
        if sha256_file(evidence_dir / rel) != digest:
            report.modified.append(rel)
            continue
        allowed = _owner_of(rel, owners)
        if allowed is not None and writer is not None and writer not in allowed:
            report.wrong_owner.append(rel)
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(evidence_dir / rel, target)
        report.kept.append(rel)
    return report
