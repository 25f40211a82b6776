"""S3/S4 tools: run the loaded model on chosen cases with chosen preprocessing; check outputs against the contract."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from bat.benchmark import workspace_files as wf
from bat.benchmark.tools.common import (
    ToolError,
    case_contract,
    case_extra,
    load_output,
    output_path,
    read_spec,
    read_state,
    read_weights,
    resolve_cases,
    scratch_write,
)
from bat.benchmark.tracks import get_track


def _normalise(x: np.ndarray, how: str, spec: dict[str, Any]) -> np.ndarray:
    x = x.astype(np.float64)
    if how == "unit_range":
        lo, hi = spec["intensity_range"]
        return (x - lo) / (hi - lo)
    if how == "zscore":
        return (x - np.nanmean(x)) / (np.nanstd(x) + 1e-9)
    return x


def _write(path: Path, out: Any) -> None:
    if isinstance(out, np.ndarray):
        import io

        buf = io.BytesIO()
        np.save(buf, out, allow_pickle=False)
        scratch_write(path, buf.getvalue())
    else:
        scratch_write(path, json.dumps(out))


def inspect_outputs(
    workspace: Path, spec: dict[str, Any], cases: list[str], folder: str = wf.OUTPUTS_DIR
) -> tuple[dict[str, list[str]], str | None, list[str]]:
    """(issues per case, degeneracy message, cases without output) for `cases` in `folder` (outputs/ or submission/)."""
    track = get_track(spec["track"])
    issues: dict[str, list[str]] = {}
    preds: dict[str, Any] = {}
    missing = []
    for case in cases:
        path = output_path(workspace, spec, case, folder)
        if not path.exists():
            missing.append(case)
            continue
        try:
            preds[case] = load_output(path)
        except (ValueError, OSError) as exc:
            issues[case] = [f"unreadable output ({exc.__class__.__name__})"]
            continue
        found = track.check_case(preds[case], case_contract(spec, case_extra(workspace, spec, case)))
        if found:
            issues[case] = found
    return issues, track.degenerate(preds) if preds else None, missing


def run_model(
    workspace: Path, cases: list[str], normalize: str = "none", fill_nan: bool = False, match_contract: bool = False
) -> dict[str, Any]:
    """Run the loaded model on `cases` (ids or ["all"]) and write outputs/<case>.<npy|json>."""
    spec, state = read_spec(workspace), read_state(workspace)
    if not state.get("loaded"):
        raise ToolError("no model loaded; call load_model first")
    weights = read_weights(workspace, state["loaded"])
    chosen = resolve_cases(spec, cases)
    track = get_track(weights["track"])
    if track.name != spec["track"]:
        raise ToolError(f"loaded model {weights['name']} is a {track.name} model; the task is {spec['track']}")
    for case in chosen:
        x = np.load(Path(workspace) / spec["inputs"][case], allow_pickle=False)
        bad = ~np.isfinite(x)
        if fill_nan and bad.any():
            x = np.where(bad, np.nanmedian(x), x)
        extra = {**case_extra(workspace, spec, case), "input_shape": list(x.shape)}
        out = track.apply(weights["params"], _normalise(x, normalize, spec), extra)
        if bad.any() and not fill_nan:
            out = track.nan_output(out)
        if weights["native_layout"] == "alt" and not match_contract:
            out = track.to_alt(out, extra)
        _write(output_path(workspace, spec, case), out)
    issues, degenerate, _ = inspect_outputs(workspace, spec, chosen)
    settings = {"normalize": normalize, "fill_nan": fill_nan, "match_contract": match_contract}
    text = f"ran {weights['name']} on {len(chosen)} case(s) with {json.dumps(settings)}; wrote outputs/<case>.{spec['output']['format']}"
    return {
        "text": text,
        "meta": {
            "model": weights["name"],
            "cases": chosen,
            "settings": settings,
            "issues": issues,
            "degenerate": degenerate,
        },
    }


def check_outputs(workspace: Path, cases: list[str] | None = None) -> dict[str, Any]:
    """Check outputs/ for `cases` (default: every case with an output): format, shape, range, NaN, degeneracy."""
    spec = read_spec(workspace)
    if cases is None or cases == ["all"]:
        chosen = [c for c in spec["cases"] if output_path(workspace, spec, c).exists()]
        if not chosen:
            raise ToolError("outputs/ holds no outputs yet; run_model first")
    else:
        chosen = resolve_cases(spec, cases)
    issues, degenerate, missing = inspect_outputs(workspace, spec, chosen)
    lines = [f"checked {len(chosen) - len(missing)} output(s)"]
    lines += [f"- {case}: {'; '.join(found)}" for case, found in issues.items()]
    if degenerate:
        lines.append(f"- DEGENERATE: {degenerate}")
    if missing:
        lines.append(f"- no output yet for: {', '.join(missing)}")
    without = [c for c in spec["cases"] if not output_path(workspace, spec, c).exists()]
    if not issues and not degenerate and not missing:
        lines.append("all checked outputs match the contract")
    lines.append(f"{len(spec['cases']) - len(without)}/{len(spec['cases'])} cases have outputs")
    clean = not issues and not degenerate and not missing
    return {
        "text": "\n".join(lines),
        "meta": {"cases": chosen, "issues": issues, "degenerate": degenerate, "missing": missing, "clean": clean},
    }
