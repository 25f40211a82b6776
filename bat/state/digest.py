"""sha256 digests of files and directory trees (path-sorted, content + relative path)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from bat.state.round_layout import DONE_NAME

_CHUNK = 1 << 20


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of one file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_tree(root: str | os.PathLike[str], *, exclude: tuple[str, ...] = ()) -> str:
    """Hex sha256 over every regular file under `root` (relative path + content), in sorted order.

    Names in `exclude` (file or directory basenames) are skipped, e.g. the DONE marker itself.
    """
    base = Path(root)
    digest = hashlib.sha256()
    for path in sorted(p for p in base.rglob("*") if p.is_file() and not p.is_symlink()):
        rel = path.relative_to(base)
        if any(part in exclude for part in rel.parts):
            continue
        digest.update(str(rel.as_posix()).encode("utf-8") + b"\0")
        digest.update(sha256_file(path).encode("ascii") + b"\n")
    return digest.hexdigest()


def sha256_path(path: str | os.PathLike[str]) -> str | None:
    """Digest of a file or a tree; None when the path does not exist."""
    p = Path(path)
    if p.is_file():
        return sha256_file(p)
    if p.is_dir():
        return sha256_tree(p, exclude=(DONE_NAME,))
    return None
