"""Host-side workspace checks around a call: stat snapshots and diffs, escaping symlinks, ownership."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from bat.sandbox.record import FilesChanged

Snapshot = dict[str, tuple[int, ...]]


def _walk(root: Path) -> Iterable[tuple[str, os.stat_result, Path]]:
    """Yield (relative posix path, lstat, full path) for everything under `root`, never following links."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        for name in [*dirnames, *filenames]:
            full = here / name
            try:
                info = full.lstat()
            except FileNotFoundError:
                continue
            yield full.relative_to(root).as_posix(), info, full


def snapshot(root: str | os.PathLike[str]) -> Snapshot:
    """Map each path under `root` to (kind, size, mtime_ns, ctime_ns, inode, mode); reads only metadata."""
    base = Path(root)
    return {
        rel: (stat.S_IFMT(info.st_mode), info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_mode)
        for rel, info, _ in _walk(base)
    }


def diff(before: Snapshot, after: Snapshot) -> FilesChanged:
    """Paths added, modified (any metadata change of a non-directory) and removed between two snapshots."""
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    modified = sorted(
        rel for rel in set(before) & set(after) if before[rel] != after[rel] and not stat.S_ISDIR(after[rel][0])
    )
    return FilesChanged(added=added, modified=modified, removed=removed)


def contain_symlinks(root: str | os.PathLike[str], inner_root: str | None = None) -> list[str]:
    """Remove symlinks under `root` whose target leaves it; return one evidence line per removed link.

    Absolute targets under `inner_root` (the workspace as the sandbox saw it, e.g. `/workspace`) are
    rewritten to equivalent relative links so host-side readers stay inside the workspace too.
    """
    base = Path(root).resolve()
    links = [(rel, full) for rel, info, full in _walk(base) if stat.S_ISLNK(info.st_mode)]
    if inner_root:
        for _rel, full in links:
            target = os.readlink(full)
            inner = inner_root.rstrip("/")
            if target == inner or target.startswith(inner + "/"):
                mapped = base / target[len(inner) :].lstrip("/")
                full.unlink()
                os.symlink(os.path.relpath(mapped, full.parent), full)
    evidence: list[str] = []
    for rel, full in links:
        target = os.readlink(full)
        resolved = Path(os.path.realpath(full))
        if resolved != base and base not in resolved.parents:
            full.unlink()
            evidence.append(f"symlink {rel} -> {target} leaves the workspace; removed")
    return evidence


def own_tree(root: str | os.PathLike[str], uid: int, gid: int) -> int:
    """lchown `root` and everything under it to uid:gid where it differs; returns how many changed.

    Files with more than one hard link are left alone: their inode may be shared with a file outside.
    """
    base = Path(root)
    changed = 0
    for _, info, full in [("", base.lstat(), base), *_walk(base)]:
        if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
            continue
        if info.st_uid != uid or info.st_gid != gid:
            os.lchown(full, uid, gid)
            changed += 1
    return changed


def remove_special_files(root: str | os.PathLike[str]) -> list[str]:
    """Delete FIFOs, sockets and device nodes under `root` (they could hang host-side readers)."""
    evidence = []
    for rel, info, full in list(_walk(Path(root))):
        mode = info.st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
            full.unlink()
            evidence.append(f"removed special file {rel} (mode {stat.filemode(mode)})")
    return evidence


def total_bytes(snap: Snapshot) -> int:
    """Sum of the sizes of the regular files in a snapshot."""
    return sum(entry[1] for entry in snap.values() if stat.S_ISREG(entry[0]))


def fingerprint(paths: Iterable[str | os.PathLike[str]]) -> str:
    """Digest of the metadata of every entry under `paths` (missing paths included as such)."""
    digest = hashlib.sha256()
    for top in sorted(str(p) for p in paths):
        base = Path(top)
        digest.update(top.encode() + b"\0")
        if not base.exists():
            digest.update(b"<missing>\n")
            continue
        if base.is_file():
            info = base.lstat()
            digest.update(f"{info.st_size}\0{info.st_mtime_ns}\0{info.st_ctime_ns}\n".encode())
            continue
        for rel, info, _ in sorted(_walk(base)):
            digest.update(f"{rel}\0{info.st_size}\0{info.st_mtime_ns}\0{info.st_ctime_ns}\n".encode())
    return digest.hexdigest()
