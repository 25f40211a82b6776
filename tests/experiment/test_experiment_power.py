"""Paired per-run comparison of arms from their held-out run records, and the gap a run count can detect."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bat.experiment.power import (
    PowerInputError,
    arm_run_scores,
    main,
    minimum_detectable_difference,
    paired_comparison,
    runs_needed,
)
from bat.schemas.evaluation import EvalRun
from bat.state.jsonl import write_jsonl
from bat.state.layout import RunLayout


def _arm(root: Path, overall: list[float], *, final_round: int = 2, instances: list[str] | None = None) -> Path:
    """An arm x seed directory: a done `experiment_arm.json` and its end-of-run final-split runs."""
    root.mkdir(parents=True)
    record = {"arm": root.name, "kind": "trained", "seed": 1, "status": "done", "final_round": final_round}
    (root / "experiment_arm.json").write_text(json.dumps(record))
    instances = instances or [f"hx-{i}" for i in range(len(overall))]
    runs = [
        EvalRun(
            run_id=f"final-t-r{i:02d}",
            split="final",
            track="t",
            repeat=i,
            seed=100 + i,
            instance_id=instances[i],
            overall=value,
        )
        for i, value in enumerate(overall)
    ]
    path = RunLayout(root).heldout_run_records(final_round, "final")
    path.parent.mkdir(parents=True)
    write_jsonl(path, runs)
    return root


def test_seeds_average_per_run_and_arms_pair_on_the_same_runs(tmp_path):
    a1 = _arm(tmp_path / "a1", [1.0, 0.0, 1.0, 0.0])
    a2 = _arm(tmp_path / "a2", [1.0, 1.0, 0.0, 0.0])
    b = _arm(tmp_path / "b", [0.0, 0.0, 1.0, 0.0], final_round=0)
    a = arm_run_scores([a1, a2], "final")
    assert [v for _, v in a.values()] == [1.0, 0.5, 0.5, 0.0]
    c = paired_comparison(a, arm_run_scores([b], "final"), gaps=(0.1,))
    assert c["n_runs"] == 4
    assert c["mean_delta"] == pytest.approx((1.0 + 0.5 - 0.5 + 0.0) / 4)
    assert c["runs_differing"] == 3
    assert c["half_width"] > 0 and 0 < c["p_value"] < 1
    assert c["minimum_detectable"] == pytest.approx(minimum_detectable_difference(c["sd_delta"], 4))


def test_seed_averages_equal_but_for_rounding_do_not_differ():
    """Three seeds of one checkpoint averaged per run need not give back the run's score to the last bit."""
    third = 0.1 + 0.2  # 0.30000000000000004
    a = {f"r{i}": (f"i{i}", (third + third + third) / 3) for i in range(3)}
    b = {f"r{i}": (f"i{i}", 0.3) for i in range(3)}
    assert a["r0"][1] != 0.3
    c = paired_comparison(a, b)
    assert c["mean_delta"] == 0.0 and c["sd_delta"] == 0.0 and c["p_value"] == 1.0 and c["runs_differing"] == 0


def test_minimum_detectable_difference_and_runs_needed_agree():
    # (t_.975 + t_.8) with 19 degrees of freedom is 2.093 + 0.861
    assert minimum_detectable_difference(0.5, 20) == pytest.approx(2.954 * 0.5 / 20**0.5, abs=1e-3)
    n = runs_needed(0.5, 0.1)
    assert n is not None
    assert minimum_detectable_difference(0.5, n) <= 0.1 < minimum_detectable_difference(0.5, n - 1)
    assert runs_needed(0.5, 1e-6) is None
    assert runs_needed(0.0, 0.1) == 2


def test_runs_facing_other_instances_are_refused(tmp_path, capsys):
    a = _arm(tmp_path / "a", [1.0, 0.0], instances=["x", "y"])
    b = _arm(tmp_path / "b", [1.0, 0.0], instances=["x", "z"])
    with pytest.raises(PowerInputError, match="face other instances"):
        arm_run_scores([a, b], "final")
    code = main(["--arm", f"a={a}", "--arm", f"b={b}"])
    assert code == 2
    err = capsys.readouterr().err
    assert "cannot be paired" in err and "Traceback" not in err


def test_unfinished_arm_and_bad_arguments_exit_2_naming_the_file(tmp_path, capsys):
    a = _arm(tmp_path / "a", [1.0, 0.0])
    b = tmp_path / "b"
    b.mkdir()
    (b / "experiment_arm.json").write_text(json.dumps({"arm": "b", "kind": "trained", "seed": 1, "status": "failed"}))
    assert main(["--arm", f"a={a}", "--arm", f"b={b}"]) == 2
    assert str(b / "experiment_arm.json") in capsys.readouterr().err
    assert main(["--arm", f"a={a}", "--arm", "nodirs"]) == 2
    assert "NAME=DIR" in capsys.readouterr().err
    assert main(["--arm", f"a={a}", "--arm", f"b={a}", "--reference", "c"]) == 2
    assert "valid: ['a', 'b']" in capsys.readouterr().err


def test_report_prints_each_arm_against_the_reference(tmp_path, capsys):
    a = _arm(tmp_path / "a", [1.0, 1.0, 0.0, 1.0])
    b = _arm(tmp_path / "b", [0.0, 1.0, 0.0, 0.0])
    assert main(["--arm", f"a={a}", "--arm", f"b={b}", "--gap", "50"]) == 0
    out = capsys.readouterr().out
    assert "a - b: +50.0" in out and "2/4 runs differ" in out and "50 points:" in out
