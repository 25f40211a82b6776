"""The evaluate path through the benchmark's external-evaluator adapter (a real subprocess writing cells)."""

import sys
import textwrap

import pytest

from bat.config import parse_config
from bat.evaluate.runner import evaluate_split
from bat.state.layout import RunLayout

EVALUATOR = textwrap.dedent("""
    import json, sys
    request = json.load(open(sys.argv[1]))
    cells = []
    for t, track in enumerate(request["tracks"]):
        for r in range(request["repeats"]):
            null = track == "vqa" and r == 1
            cells.append({"track": track, "task_id": f"ext-{track}", "repeat": r, "valid": not null,
                          "task": None if null else 0.2 * (t + 1),
                          "stages": {k: (None if null else 0.5) for k in request["stages"]}})
    json.dump({"cells": cells}, open(request["output"], "w"))
""")


def test_external_evaluator_cells_are_aggregated_and_nulls_reported(tmp_path):
    script = tmp_path / "evaluator.py"
    script.write_text(EVALUATOR)
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "model.safetensors").write_bytes(b"weights")
    cfg = parse_config(
        {
            "benchmark": {
                "kind": "external",
                "tracks": ["classification", "vqa"],
                "repeats": 2,
                "external": {"command": [sys.executable, str(script), "{request}"]},
            }
        }
    )
    layout = RunLayout(tmp_path / "run").ensure()
    agg, written = evaluate_split(cfg, layout, 0, "controller", str(ckpt), driver=None, config_hash="x")  # type: ignore[arg-type]
    assert agg.n_runs == 4 and agg.tracks["classification"].task == pytest.approx(0.2)
    assert agg.tracks["classification"].overall == pytest.approx(0.5 * 0.2 + 0.5 * 0.5)
    assert not agg.routable and {(c.track, c.repeat) for c in agg.null_cells} == {("vqa", 1)}
    assert agg.stages["S1"] is None and agg.tracks["classification"].stages["S1"] == pytest.approx(0.5)
    assert all(str(p).startswith(str(layout.heldout_dir)) for p in written[:-1])


def test_external_request_names_the_split_and_the_run(tmp_path):
    import json

    script = tmp_path / "evaluator.py"
    seen = tmp_path / "seen.json"
    script.write_text(EVALUATOR + f"\nimport shutil; shutil.copy(sys.argv[1], {str(seen)!r})\n")
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "model.safetensors").write_bytes(b"weights")
    command = [sys.executable, str(script), "{request}"]
    cfg = parse_config(
        {"benchmark": {"kind": "external", "tracks": ["a"], "repeats": 1, "external": {"command": command}}}
    )
    layout = RunLayout(tmp_path / "run").ensure()
    evaluate_split(cfg, layout, 3, "final", str(ckpt), driver=None, config_hash="h1", phase="final_test")  # type: ignore[arg-type]
    request = json.loads(seen.read_text())
    assert request["split"] == "final"
    assert request["run"] == {
        "run_dir": str(layout.root),
        "round": 3,
        "phase": "final_test",
        "variant": None,
        "config_hash": "h1",
    }
