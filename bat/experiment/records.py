"""Reading and writing the experiment's records (`bat.schemas.experiment`, `bat.schemas.experiment_results`): the
one place where they meet JSON on disk.

Reads and writes any path it is given (the paths come from `bat.state.experiment_layout`); writes are atomic
(`bat.state.atomic`), and a record is written with the keys it holds only (`ExperimentRecord.to_json`). A file that
is not valid JSON, or not a record of the expected kind, raises `StateFileError` naming it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import ValidationError

from bat.schemas.experiment import ExperimentRecord
from bat.state.atomic import atomic_write_json, read_json
from bat.state.errors import StateFileError

R = TypeVar("R", bound=ExperimentRecord)


def load_record(path: Path, kind: type[R]) -> R:
    """The record of type `kind` in `path`; StateFileError when it is missing, not JSON or not such a record."""
    path = Path(path)
    if not path.is_file():
        raise StateFileError(path, f"no {kind.__name__} record here", hint="run what writes it first")
    try:
        return kind.model_validate(read_json(path))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise StateFileError(
            path,
            f"not a {kind.__name__} record ({where}: {first['msg']})",
            hint="restore it from a good copy, or move it aside to redo what wrote it",
        ) from None


def read_record(path: Path, kind: type[R]) -> R | None:
    """`load_record`, or None when `path` does not exist."""
    return load_record(path, kind) if Path(path).exists() else None


def write_record(path: Path, record: ExperimentRecord) -> Path:
    """Write `record` atomically as canonical JSON at `path`; returns `path`."""
    return atomic_write_json(path, record.to_json())


def read_records(paths: list[Path], kind: type[R]) -> list[R]:
    """`load_record` of every path, in order."""
    return [load_record(p, kind) for p in paths]
