import json
import sys

import pytest

from bat.benchmark.external import ExternalError, build_argv, run_external
from bat.config.root import BatConfig

EVALUATOR = r"""
import json, sys
request, output, mode = sys.argv[1], sys.argv[2], sys.argv[3]
req = json.load(open(request))
cells = [{"track": t, "task_id": f"{t}-task", "repeat": r, "valid": True, "task": 0.5,
          "stages": {k: 1.0 for k in req["stages"]}} for t in req["tracks"] for r in range(req["repeats"])]
if mode == "dup":
    cells.append(dict(cells[0]))
if mode == "range":
    cells[0]["stages"]["S1"] = 1.5
if mode == "missing_stage":
    del cells[0]["stages"]["S3"]
if mode == "missing_cell":
    cells.pop()
if mode == "null":
    cells[0]["stages"]["S2"] = None
json.dump({"cells": cells}, open(output, "w"))
"""


def _cfg(tmp_path, mode):
    script = tmp_path / "evaluator.py"
    script.write_text(EVALUATOR)
    return BatConfig.model_validate(
        {
            "benchmark": {
                "kind": "external",
                "tracks": ["vqa", "report"],
                "repeats": 2,
                "external": {"command": [sys.executable, str(script), "{request}", "{output}", mode]},
            }
        }
    )


def test_external_cells_are_parsed_and_scored(tmp_path):
    scores = run_external("ckpt", tmp_path, _cfg(tmp_path, "ok"))
    assert len(scores) == 4
    assert all(s.agentic == pytest.approx(1.0) and s.overall == pytest.approx(0.75) for s in scores)
    request = json.loads((tmp_path / "request.json").read_text())
    assert request["stages"] == ["S1", "S2", "S3", "S4", "S5"] and request["checkpoint"] == "ckpt"


@pytest.mark.parametrize(
    "mode,message",
    [
        ("dup", "duplicate"),
        ("range", "less than or equal|out of"),
        ("missing_stage", "must be exactly"),
        ("missing_cell", "missing cells"),
    ],
)
def test_external_output_is_validated_strictly(tmp_path, mode, message):
    with pytest.raises(ExternalError, match=message):
        run_external("ckpt", tmp_path, _cfg(tmp_path, mode))


def test_null_stage_stays_null(tmp_path):
    scores = run_external("ckpt", tmp_path, _cfg(tmp_path, "null"))
    nulls = [s for s in scores if not s.valid]
    assert len(nulls) == 1 and nulls[0].overall is None and nulls[0].agentic is None


def test_placeholders_must_be_whole_arguments():
    assert build_argv(["x", "{output}"], {"checkpoint": "c", "request": "r", "output": "o"}) == ["x", "o"]
    with pytest.raises(ExternalError, match="whole arguments"):
        build_argv(["x", "--out={output}"], {"checkpoint": "c", "request": "r", "output": "o"})


def test_request_carries_the_split_the_run_and_the_benchmarks_own_names(tmp_path):
    cfg = _cfg(tmp_path, "ok").model_dump()
    cfg["benchmark"].update(tracks=["liver_ct", "chest_xr"], split_repeats={"test": 3})
    cfg["stages"] = [{"key": "R1", "name": "Read", "weight": 0.4}, {"key": "R2", "name": "Report", "weight": 0.6}]
    cfg["benchmark"]["contract"] = {
        "stages": {key: {"items": [{"id": f"{key.lower()}a", "text": "done"}]} for key in ("R1", "R2")}
    }
    identity = {"run_dir": "/runs/a", "round": 2, "phase": "final_test", "variant": None, "config_hash": "abc"}
    scores = run_external("ckpt", tmp_path, BatConfig.model_validate(cfg), split="test", run=identity)
    request = json.loads((tmp_path / "request.json").read_text())
    assert request["split"] == "test" and request["run"] == identity and request["request_version"] == 2
    assert request["tracks"] == ["liver_ct", "chest_xr"] and request["stages"] == ["R1", "R2"]
    assert request["repeats"] == 3 and len(scores) == 6
    assert {s.track for s in scores} == {"liver_ct", "chest_xr"} and set(scores[0].stages) == {"R1", "R2"}
