"""Versioned JSONL through `jsonlines`: whole-file atomic writes, appends of complete lines, strict reads.

A corrupt or truncated line is never skipped: it raises `CorruptRecordError` naming file and line.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import jsonlines
from pydantic import BaseModel, ValidationError

from bat.state.atomic import atomic_write_bytes
from bat.state.errors import StateFileError

M = TypeVar("M", bound=BaseModel)


class CorruptRecordError(StateFileError):
    """A JSONL line that is not valid JSON or does not match its record schema."""

    def __init__(self, path: Path, line: int, reason: str) -> None:
        super().__init__(path, reason, line=line)


def _to_obj(record: Any) -> Any:
    if isinstance(record, BaseModel):
        return record.model_dump(mode="json")
    return record


def _encode(records: Iterable[Any]) -> bytes:
    buffer = io.StringIO()
    with jsonlines.Writer(buffer, compact=True, sort_keys=True) as writer:
        for record in records:
            writer.write(_to_obj(record))
    return buffer.getvalue().encode("utf-8")


def write_jsonl(path: str | os.PathLike[str], records: Iterable[Any]) -> int:
    """Write all `records` (dicts or pydantic models) to `path` atomically; returns the count."""
    items = list(records)
    atomic_write_bytes(path, _encode(items))
    return len(items)


def append_jsonl(path: str | os.PathLike[str], records: Iterable[Any]) -> None:
    """Append complete lines (one write + fsync); a torn tail from a crash is reported by readers."""
    data = _encode(records)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "ab") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def iter_jsonl(
    path: str | os.PathLike[str], model: type[M] | None = None, *, skip_torn_tail: bool = False
) -> Iterator[Any]:
    """Yield records from `path`, validated against `model` when given; raises CorruptRecordError. With
    `skip_torn_tail` a last line without its newline (a writer still appending) ends the records instead."""
    p = Path(path)
    with open(p, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.endswith(b"\n"):
                if skip_torn_tail:
                    return
                raise CorruptRecordError(p, number, "truncated line (no newline at end of file)")
            text = raw.decode("utf-8", errors="replace").strip()
            if not text:
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                raise CorruptRecordError(p, number, f"invalid JSON: {exc.msg} at column {exc.colno}") from exc
            if model is None:
                yield obj
                continue
            try:
                yield model.model_validate(obj)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(part) for part in first["loc"]) or "<record>"
                raise CorruptRecordError(p, number, f"{model.__name__}.{where}: {first['msg']}") from exc


def read_jsonl(
    path: str | os.PathLike[str], model: type[M] | None = None, *, skip_torn_tail: bool = False
) -> list[Any]:
    """Read every record of `path` into a list (see `iter_jsonl`)."""
    return list(iter_jsonl(path, model, skip_torn_tail=skip_torn_tail))


def read_jsonl_resuming(path: str | os.PathLike[str], model: type[M] | None = None) -> tuple[list[Any], bool]:
    """Records of an append-only progress file for a resume: a torn final line (no newline: a crash during the
    last append) is cut off the file, so the work it recorded is redone; returns (records, whether one was cut).
    Damage anywhere else raises `CorruptRecordError` as `read_jsonl` does."""
    p = Path(path)
    data = p.read_bytes()
    cut = bool(data) and not data.endswith(b"\n")
    if cut:
        atomic_write_bytes(p, data[: data.rfind(b"\n") + 1])
    return read_jsonl(p, model), cut
