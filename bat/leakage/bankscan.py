"""Scan every file of one bank version directory into a `LeakageReport`.

Rows: each JSONL record is a row (files matching `rl_row_globs` are RL rows); a `.json` file is one row
(parsed, keys included); any other UTF-8 file is one row (its text); a binary file (NUL byte or not UTF-8)
contributes only its relative path. Every relative path is itself scanned (file names can leak ids).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bat.leakage.report import LeakageReport, ReportBuilder
from bat.leakage.scanner import Scanner
from bat.state.bank_layout import BankVersionLayout
from bat.state.digest import sha256_file
from bat.state.jsonl import iter_jsonl

_ID_KEYS = ("state_id", "row_id", "trajectory_id", "task_id", "id")


def bank_files(bank_dir: Path, skip: tuple[str, ...]) -> list[Path]:
    """Regular files under `bank_dir` in sorted order, minus the top-level names in `skip`."""
    root = Path(bank_dir)
    files = (p for p in root.rglob("*") if p.is_file() and not p.is_symlink())
    return sorted(p for p in files if p.relative_to(root).as_posix() not in skip)


def row_id_of(record: Any, fallback: str) -> str:
    """The record's own id (state_id / row_id / trajectory_id / task_id / id) or `fallback`."""
    if isinstance(record, dict):
        for key in _ID_KEYS:
            value = record.get(key)
            if isinstance(value, str) and value:
                return value
    return fallback


def _is_rl(rel: str, globs: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(rel, pattern) for pattern in globs)


def iter_file_rows(path: Path, rel: str) -> Iterator[tuple[str, int | None, Any]]:
    """Yield (row_id, line, row) for one file; (rel, None, None) for a binary file."""
    if path.suffix == ".jsonl":
        for ordinal, record in enumerate(iter_jsonl(path), start=1):
            yield row_id_of(record, f"{rel}:{ordinal}"), ordinal, record
        return
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or "\0" in text:
        yield rel, None, None
        return
    if path.suffix == ".json":
        try:
            yield rel, None, json.loads(text)
            return
        except json.JSONDecodeError:
            pass
    yield rel, None, text


def scan_bank_dir(bank_dir: Path, scanner: Scanner) -> LeakageReport:
    """Scan every file of `bank_dir` with `scanner` and build the report (verdict included)."""
    root = Path(bank_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"bank version directory {root} does not exist")
    config = scanner.config
    builder = ReportBuilder(config)
    for path in bank_files(root, config.skip_files):
        rel = path.relative_to(root).as_posix()
        builder.files += 1
        name_scan = scanner.scan_row({"file": rel})
        if name_scan.findings:
            builder.add(rel, rel, None, name_scan, count=False)
        rl = _is_rl(rel, config.rl_row_globs)
        for row_id, line, row in iter_file_rows(path, rel):
            if row is None:
                builder.binary_files += 1
                continue
            builder.add(row_id, rel, line, scanner.scan_row(row, rl_row=rl))
    report = builder.build(root.name, scanner.index.digest, scanner.index.counts())
    return report.model_copy(
        update={"manifest_digest": manifest_digest(root), "content_digest": content_digest(root, config.skip_files)}
    )


def content_digest(bank_dir: Path, skip: tuple[str, ...]) -> str:
    """`sha256:<hex>` over the relative paths and bytes of the files the scanner reads (sorted)."""
    root = Path(bank_dir)
    digest = hashlib.sha256()
    for path in bank_files(root, skip):
        digest.update(path.relative_to(root).as_posix().encode("utf-8") + b"\0")
        digest.update(sha256_file(path).encode("ascii") + b"\n")
    return "sha256:" + digest.hexdigest()


def manifest_digest(bank_dir: Path) -> str:
    """`sha256:<hex>` of the version's MANIFEST.json, or "" when it has none."""
    path = BankVersionLayout(Path(bank_dir)).manifest
    return f"sha256:{sha256_file(path)}" if path.is_file() else ""
