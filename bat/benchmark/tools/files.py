"""S1 tools: list files, read a file (arrays summarised), write the plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bat.benchmark import workspace_files as wf
from bat.benchmark.tools.common import ToolError, inside, scratch_write


def list_files(workspace: Path, path: str = ".") -> dict[str, Any]:
    """List a workspace directory (two levels, with sizes)."""
    root = inside(workspace, path)
    if not root.is_dir():
        raise ToolError(f"{path!r} is not a directory of the workspace")
    lines = []
    for entry in sorted(root.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            children = sorted(c.name for c in entry.iterdir() if not c.name.startswith("."))
            shown = ", ".join(children[:12]) + (f", ... ({len(children)} entries)" if len(children) > 12 else "")
            lines.append(f"{entry.name}/: {shown}")
        else:
            lines.append(f"{entry.name} ({entry.stat().st_size} B)")
    return {"text": "\n".join(lines) or "(empty)", "meta": {"path": path}}


def read_file(workspace: Path, path: str, max_chars: int = 1500) -> dict[str, Any]:
    """Text files as text (truncated); .npy arrays as a summary (shape, range, non-finite count)."""
    target = inside(workspace, path)
    if not target.is_file():
        raise ToolError(f"no file {path!r} in the workspace (try list_files)")
    if target.suffix == ".npy":
        import numpy as np

        arr = np.load(target, allow_pickle=False)
        finite = arr[np.isfinite(arr)] if arr.dtype.kind == "f" else arr
        bad = int(arr.size - finite.size)
        rng = (
            f"min {float(finite.min()):.4g}, max {float(finite.max()):.4g}, mean {float(finite.mean()):.4g}"
            if finite.size
            else "no finite values"
        )
        text = f"array {arr.dtype} shape {list(arr.shape)}: {rng}; non-finite values: {bad}"
    else:
        content = target.read_text(errors="replace")
        text = (
            content
            if len(content) <= max_chars
            else content[:max_chars] + f"\n... ({len(content) - max_chars} more chars)"
        )
    return {"text": text, "meta": {"path": path}}


def write_plan(workspace: Path, text: str) -> dict[str, Any]:
    """Write plan.md (replacing any previous plan)."""
    if not text.strip():
        raise ToolError("plan text is empty")
    scratch_write(Path(workspace) / wf.PLAN, text)
    return {"text": f"plan.md written ({len(text)} chars)", "meta": {"chars": len(text)}}
