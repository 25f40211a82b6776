"""Helpers shared by the tool functions: errors, workspace-confined paths, tool state, spec and outputs I/O.

Tools read and write only inside the workspace; their persistent state (installed packages, loaded
model) lives in `.tool_state/state.json` so each call can run in a fresh sandboxed process.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from bat.benchmark import workspace_files as wf
from bat.state.atomic import plain_temp_file

STATE_FILE = ".tool_state/state.json"


def scratch_write(path: Path, data: bytes | str) -> None:
    """Atomic (temp + rename) write of a workspace file; not fsynced: workspaces are scratch, not state."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = plain_temp_file(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


class ToolError(Exception):
    """A tool call that failed for a reason the agent can act on (message lists what is valid)."""


class BreachAttempt(ToolError):
    """A path argument that leaves the workspace; the call is blocked and recorded as a breach."""


def inside(workspace: Path, rel: str) -> Path:
    """Resolve `rel` inside the workspace; absolute paths or paths leaving it raise BreachAttempt."""
    root = Path(workspace).resolve()
    if Path(rel).is_absolute() and not str(Path(rel)).startswith(str(root)):
        raise BreachAttempt(f"path {rel!r} is outside the workspace; use paths relative to it")
    target = (root / rel).resolve()
    if target != root and root not in target.parents:
        raise BreachAttempt(f"path {rel!r} leaves the workspace; use paths relative to it")
    return target


def read_state(workspace: Path) -> dict[str, Any]:
    """Tool state: {"installed": [...], "loaded": model name or None}."""
    path = Path(workspace) / STATE_FILE
    if not path.exists():
        return {"installed": [], "loaded": None}
    return json.loads(path.read_text())


def write_state(workspace: Path, state: dict[str, Any]) -> None:
    scratch_write(Path(workspace) / STATE_FILE, json.dumps(state, sort_keys=True))


def read_spec(workspace: Path) -> dict[str, Any]:
    """task/spec.json of the workspace."""
    path = Path(workspace) / wf.SPEC
    if not path.exists():
        raise ToolError(f"{wf.SPEC} is missing from the workspace")
    return json.loads(path.read_text())


def model_names(workspace: Path) -> list[str]:
    """Names of the model folders under models/."""
    root = Path(workspace) / wf.MODELS_DIR
    return sorted(p.name for p in root.iterdir() if (p / wf.MODEL_WEIGHTS).exists()) if root.is_dir() else []


def read_weights(workspace: Path, name: str) -> dict[str, Any]:
    """models/<name>/weights.json; an unknown name raises listing the valid ones."""
    valid = model_names(workspace)
    if name not in valid:
        raise ToolError(f"unknown model {name!r}; valid: {valid}")
    return json.loads((Path(workspace) / wf.model_file(name, wf.MODEL_WEIGHTS)).read_text())


def resolve_cases(spec: dict[str, Any], cases: list[str]) -> list[str]:
    """Expand ["all"] and check case ids against the spec (error lists some valid ids)."""
    valid = list(spec["cases"])
    if cases == ["all"]:
        return valid
    unknown = [c for c in cases if c not in valid]
    if unknown or not cases:
        raise ToolError(f"unknown case ids {unknown or cases}; valid: {valid} or ['all']")
    return list(dict.fromkeys(cases))


def case_extra(workspace: Path, spec: dict[str, Any], case: str) -> dict[str, Any]:
    """Public per-case extras: the question JSON beside the input (if any) and the input shape."""
    src = Path(workspace) / spec["inputs"][case]
    extra: dict[str, Any] = {}
    question = src.with_suffix(".json")
    if question.exists():
        extra.update(json.loads(question.read_text()))
    return extra


def output_path(workspace: Path, spec: dict[str, Any], case: str, folder: str = wf.OUTPUTS_DIR) -> Path:
    kind = spec["output"]["format"]
    return Path(workspace) / folder / f"{case}.{kind}"


def load_output(path: Path) -> Any:
    """Read one output file (.npy array or .json object)."""
    if path.suffix == ".npy":
        import numpy as np

        return np.load(path, allow_pickle=False)
    return json.loads(path.read_text())


def case_contract(spec: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """The output contract for one case (VQA adds the question's choices)."""
    contract = dict(spec["output"])
    if "choices" in extra:
        contract["choices"] = extra["choices"]
    return contract
