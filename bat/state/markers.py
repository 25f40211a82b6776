"""`DONE.json` completion markers: written last, recording input/output digests, counts, config hash.

Readers trust only outputs whose marker exists; a phase without a marker is pending or partial.
"""

from __future__ import annotations

import datetime as _dt
import os
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bat.state.atomic import atomic_write_json, read_json
from bat.state.digest import sha256_path
from bat.state.errors import StateFileError
from bat.state.round_layout import DONE_NAME

DONE_SCHEMA_VERSION = 1


class DoneRecord(BaseModel):
    """Contents of a DONE.json marker."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = DONE_SCHEMA_VERSION
    phase: str
    round: int | None = None
    config_hash: str
    inputs: dict[str, str | None] = Field(default_factory=dict)
    """Path (relative to the run root when possible) -> sha256 (None when absent)."""
    outputs: dict[str, str | None] = Field(default_factory=dict)
    counts: dict[str, float] = Field(default_factory=dict)
    extra: dict[str, Any] = Field(default_factory=dict)
    finished_at: str
    host: str
    pid: int


def _relative(path: Path, root: Path | None) -> str:
    if root is not None:
        try:
            return path.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            pass
    return str(path)


def digest_paths(paths: Iterable[Path], root: Path | None = None) -> dict[str, str | None]:
    """Map each path (relative to `root` when inside it) to its sha256 file/tree digest."""
    return {_relative(Path(p), root): sha256_path(p) for p in paths}


def write_done(
    directory: Path,
    *,
    phase: str,
    config_hash: str,
    round_index: int | None = None,
    inputs: Iterable[Path] = (),
    outputs: Iterable[Path] = (),
    counts: dict[str, float] | None = None,
    extra: dict[str, Any] | None = None,
    run_root: Path | None = None,
) -> DoneRecord:
    """Digest inputs/outputs and write `directory/DONE.json` atomically; call only after outputs are complete."""
    record = DoneRecord(
        phase=phase,
        round=round_index,
        config_hash=config_hash,
        inputs=digest_paths(inputs, run_root),
        outputs=digest_paths(outputs, run_root),
        counts=dict(counts or {}),
        extra=dict(extra or {}),
        finished_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        host=socket.gethostname(),
        pid=os.getpid(),
    )
    atomic_write_json(Path(directory) / DONE_NAME, record)
    return record


_DAMAGED_HINT = (
    "a damaged marker cannot say the phase finished: move the phase directory aside (or delete this "
    "marker) and rerun the same command to redo the phase"
)


def read_done(directory: Path) -> DoneRecord | None:
    """The marker of `directory`, or None when the phase is not complete; a damaged marker (torn, not a
    DONE record) raises `StateFileError` naming it and what to do."""
    path = Path(directory) / DONE_NAME
    if not path.exists():
        return None
    try:
        data = read_json(path)
    except StateFileError as exc:
        raise StateFileError(path, exc.reason, line=exc.line, hint=_DAMAGED_HINT) from None
    try:
        return DoneRecord.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "<record>"
        raise StateFileError(path, f"not a DONE marker ({where}: {first['msg']})", hint=_DAMAGED_HINT) from None


def is_done(directory: Path) -> bool:
    """Whether `directory` holds a valid marker (a damaged one raises `StateFileError`, see `read_done`)."""
    return read_done(directory) is not None


def phase_status(directory: Path) -> str:
    """`done` (marker present), `partial` (files but no marker) or `pending` (nothing yet)."""
    d = Path(directory)
    if is_done(d):
        return "done"
    if d.is_dir() and any(d.iterdir()):
        return "partial"
    return "pending"
