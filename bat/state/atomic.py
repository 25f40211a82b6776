"""Atomic file and directory writes: temp in the same directory, fsync, `os.replace`, temp removed on error.

A reader therefore sees either the old complete file or the new complete file, never a torn one.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bat.state.errors import StateFileError


def _fsync_dir(directory: Path) -> None:
    """fsync a directory so a rename inside it is durable (best effort on filesystems that refuse)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def current_umask() -> int:
    """The process umask, read without changing it (Linux `/proc/self/status`; else set-and-restore)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def plain_file_mode(final: Path) -> int:
    """The mode `open(final, "w")` would leave: the existing file's mode, else 0666 minus the umask.

    `tempfile.mkstemp` creates 0600 files; without this, every state file and report would be unreadable
    to the rest of a cluster group that shares a run directory.
    """
    try:
        return final.stat().st_mode & 0o7777
    except FileNotFoundError:
        return 0o666 & ~current_umask()


def plain_temp_file(final: Path) -> tuple[int, str]:
    """Open a temp file beside `final` (for a later `os.replace`) with `plain_file_mode(final)`; returns (fd, name)."""
    mode = plain_file_mode(final)
    fd, name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
    try:
        os.fchmod(fd, mode)
    except BaseException:
        os.close(fd)
        os.unlink(name)
        raise
    return fd, name


def plain_temp_dir(parent: Path, prefix: str, suffix: str = ".tmp") -> Path:
    """Make a temp directory in `parent` with the mode `mkdir` would give it (0777 minus the umask)."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix, suffix=suffix, dir=parent))
    tmp.chmod(0o777 & ~current_umask())
    return tmp


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write `data` to `path` atomically; creates parent dirs; returns the final path.

    The file gets the mode a plain write would give it (`plain_file_mode`), not mkstemp's 0600.
    """
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = plain_temp_file(final)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    _fsync_dir(final.parent)
    return final


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write UTF-8 `text` to `path` atomically."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def dumps_json(obj: Any) -> str:
    """Canonical JSON used for every state file: sorted keys, 2-space indent, trailing newline."""
    return json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n"


def _json_default(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"cannot serialise {type(value).__name__} to JSON")


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> Path:
    """Write `obj` as canonical JSON atomically (pydantic models are dumped in JSON mode)."""
    return atomic_write_text(path, dumps_json(obj))


def read_json(path: str | os.PathLike[str]) -> Any:
    """Read a JSON file; a malformed (torn, non-UTF-8) file raises `StateFileError` naming the path and line."""
    p = Path(path)
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise StateFileError(
            p,
            f"invalid JSON ({exc.msg})",
            line=exc.lineno,
            hint="the file is damaged (a torn copy?); restore it or remove it to redo what wrote it",
        ) from None
    except UnicodeDecodeError as exc:
        raise StateFileError(p, f"not UTF-8 (byte {exc.start})", hint="restore the file from a good copy") from None


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Build a directory under a temp name beside `path` and rename it into place on success.

    Yields the temp directory to fill. If `path` already exists it is replaced only after the
    new one is complete (old moved aside, new renamed in, old removed). On error the temp is removed.
    The directory gets the mode `mkdir` would give it (0777 minus the umask), not mkdtemp's 0700.
    """
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = plain_temp_dir(final.parent, prefix=f".{final.name}.")
    try:
        yield tmp
        if final.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".old", dir=final.parent))
            os.rmdir(old)
            os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, final)
        _fsync_dir(final.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
