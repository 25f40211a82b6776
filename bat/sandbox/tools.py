"""Generic workspace tools (run inside the sandbox via `Sandbox.call_tool("bat.sandbox.tools:<name>", ...)`).

Each takes the workspace path first and returns short text a small model can read.  Paths are
relative to the workspace; a path that leaves it is refused with a clear message (the sandbox would
contain it anyway - this keeps the observation helpful).
"""

from __future__ import annotations

import os
from pathlib import Path

MAX_LIST = 200


def _inside(workspace: Path, path: str) -> Path:
    """Resolve `path` under `workspace`; ValueError when it leaves the workspace."""
    root = workspace.resolve()
    target = (root / path).resolve()
    if target != root and root not in target.parents:
        raise ValueError(f"path {path!r} leaves the workspace; use a path relative to the workspace")
    return target


def list_files(workspace: Path, path: str = ".") -> str:
    """One line per file under `path` (relative paths and sizes), at most 200 lines."""
    base = _inside(workspace, path)
    if not base.is_dir():
        raise ValueError(f"{path!r} is not a directory")
    lines: list[str] = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        for name in sorted(filenames):
            full = Path(dirpath) / name
            rel = full.relative_to(workspace.resolve()).as_posix()
            size = full.lstat().st_size
            lines.append(f"{rel} ({size} bytes)")
    shown = lines[:MAX_LIST]
    if len(lines) > MAX_LIST:
        shown.append(f"... {len(lines) - MAX_LIST} more")
    return "\n".join(shown) if shown else "(no files)"


def read_file(workspace: Path, path: str, max_chars: int = 2000) -> str:
    """The first `max_chars` characters of a text file in the workspace."""
    target = _inside(workspace, path)
    text = target.read_text(encoding="utf-8", errors="replace")
    return text if len(text) <= max_chars else text[:max_chars] + f"\n...[{len(text) - max_chars} more chars]"


def write_file(workspace: Path, path: str, content: str) -> str:
    """Write `content` to a workspace file (parents created); returns what was written."""
    target = _inside(workspace, path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content, encoding="utf-8")
    return f"wrote {len(content)} chars to {target.relative_to(workspace.resolve()).as_posix()}"
