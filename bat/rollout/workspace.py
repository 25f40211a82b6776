"""Workspace bookkeeping for rollouts: which files a tool call wrote (rollout-side diff) and evidence copies."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

Snapshot = dict[str, tuple[int, int]]

VOLATILE_KEYS = frozenset(
    {
        "duration_s",
        "duration",
        "duration_ms",
        "elapsed_s",
        "wall_s",
        "started_at",
        "ended_at",
        "start_time",
        "end_time",
        "timestamp",
        "time_s",
    }
)
"""Timing fields of execution records; kept out of rollout shards so a rerun yields identical bytes."""


def snapshot(root: Path | None) -> Snapshot:
    """Reads the tree under `root`: relative path -> (size, mtime_ns) of every regular file (symlinks skipped)."""
    if root is None or not root.is_dir():
        return {}
    out: Snapshot = {}
    for dirpath, _dirnames, filenames in os.walk(root, followlinks=False):
        for name in filenames:
            path = Path(dirpath) / name
            if path.is_symlink():
                continue
            st = path.stat()
            out[path.relative_to(root).as_posix()] = (st.st_size, st.st_mtime_ns)
    return out


def sha256_file(path: Path) -> str:
    """`sha256:<hex>` of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()


def diff(root: Path | None, before: Snapshot, after: Snapshot) -> tuple[dict[str, str], list[str]]:
    """(written: path -> sha256 of files created/changed between the snapshots, deleted paths)."""
    if root is None:
        return {}, []
    written = {rel: sha256_file(root / rel) for rel, meta in sorted(after.items()) if before.get(rel) != meta}
    deleted = sorted(set(before) - set(after))
    return written, deleted


def split_volatile(record: Any) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """(record without timing keys, the timing keys) for an execution record dict (or pydantic model)."""
    if record is None:
        return None, {}
    if hasattr(record, "model_dump"):
        record = record.model_dump(mode="json")
    if not isinstance(record, dict):
        return {"value": repr(record)}, {}
    stable = {k: v for k, v in record.items() if k not in VOLATILE_KEYS}
    timing = {k: v for k, v in record.items() if k in VOLATILE_KEYS}
    return stable, timing


def copy_evidence(workspace: Path | None, dest: Path) -> bool:
    """Copy the final workspace tree to `dest` (symlinks copied as links, never followed); False if none."""
    if workspace is None or not workspace.is_dir():
        return False
    shutil.copytree(workspace, dest, symlinks=True)
    return True
