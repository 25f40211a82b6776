"""S2 tools: check a model's compatibility, install an offline package, load a model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bat.benchmark.tools.common import ToolError, read_spec, read_state, read_weights, write_state


def check_compatibility(workspace: Path, model: str) -> dict[str, Any]:
    """Compare the model card's modality, input and output layout with the task spec."""
    spec, weights = read_spec(workspace), read_weights(workspace, model)
    fits = weights["modality"] == spec["modality"] and weights["track"] == spec["track"]
    layout = (
        "matches the contract"
        if weights["native_layout"] == "contract"
        else "differs from the contract (use match_contract=true)"
    )
    req = ", ".join(weights["requires"]) or "none"
    text = (
        f"{model}: modality {weights['modality']} vs task modality {spec['modality']} -> "
        f"{'COMPATIBLE' if fits else 'INCOMPATIBLE'}; expects normalize={weights['expects']}; "
        f"output layout {layout}; requires packages: {req}"
    )
    return {"text": text, "meta": {"model": model, "compatible": fits}}


def install(workspace: Path, package: str) -> dict[str, Any]:
    """Install a package from the offline wheelhouse (env/wheelhouse.txt)."""
    house = Path(workspace) / "env" / "wheelhouse.txt"
    available = house.read_text().split() if house.exists() else []
    if package not in available:
        raise ToolError(f"package {package!r} is not in the offline wheelhouse; available: {available}")
    state = read_state(workspace)
    if package not in state["installed"]:
        state["installed"] = sorted([*state["installed"], package])
        write_state(workspace, state)
    return {"text": f"installed {package}", "meta": {"package": package}}


def load_model(workspace: Path, model: str) -> dict[str, Any]:
    """Load a model (its required packages must be installed first)."""
    weights = read_weights(workspace, model)
    state = read_state(workspace)
    missing = [p for p in weights["requires"] if p not in state["installed"]]
    if missing:
        raise ToolError(
            f"ModuleNotFoundError: {model} needs package(s) {missing}, which are not installed (use install)"
        )
    state["loaded"] = model
    write_state(workspace, state)
    return {
        "text": f"loaded {model} (track {weights['track']}, modality {weights['modality']})",
        "meta": {"model": model},
    }
