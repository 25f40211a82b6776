"""`bat train lr-probe` end to end on the tiny policy: scaled candidates, KL to the start on the bank's KL probe rows,
a controller evaluation of each under the run's held-out secret (or a KL-only screen), resumable, nothing written
in the run."""

from __future__ import annotations

import pytest
from curriculum_helpers import make_bank, one_step_round, perturbed_copy

from bat.benchmark.secret import run_secret
from bat.cli.main import main
from bat.config.root import BatConfig
from bat.state.atomic import read_json
from bat.state.layout import RunLayout

SETTINGS = [
    "benchmark.tracks=[vqa]",
    "benchmark.repeats=1",
    "benchmark.runtime=inprocess",
    "rollout.budgets.max_new_tokens_per_turn=8",
    "rollout.budgets.max_assistant_turns=1",
    "rollout.budgets.max_tool_calls=1",
    "curriculum.fallback.kl_prompts=4",
    "curriculum.fallback.kl_new_tokens=8",
]


@pytest.mark.slow
def test_lr_probe_scales_evaluates_and_resumes(tmp_path, tiny_model_builder, capsys):
    start = tiny_model_builder(BatConfig().model.tiny, 7)
    layout = make_bank(RunLayout(tmp_path / "run").ensure(), per_stage=4)
    candidate = perturbed_copy(start, layout.candidate_model(1), 0.02)
    secret = run_secret(layout)
    one_step_round(layout, start, 1e-5)  # the plan names the start, the grpo metrics the step's lr
    before = sorted(p.relative_to(layout.root) for p in layout.root.rglob("*"))
    out = tmp_path / "probe"
    args = ["train", "lr-probe", "--state", str(layout.root), "--round", "1", "--out", str(out)]
    args += [a for s in SETTINGS for a in ("--set", s)]

    assert main([*args, "--scales", "3", "--kl-only"]) == 0  # a KL screen: no evaluation
    assert "KL only" in capsys.readouterr().out
    (screened,) = read_json(out / "lr_probe.json")["rows"]
    assert screened["evaluated"] is False and screened["overall"] is None and screened["kl_to_start"] > 0.0
    assert not (out / "x3" / "round_01").exists()

    assert main([*args, "--scales", "0,1,3"]) == 0  # x3 was only screened: now evaluated
    printed = capsys.readouterr().out
    assert "x3     lr 3.0e-05" in printed and "Overall" in printed
    rows = {r["scale"]: r for r in read_json(out / "lr_probe.json")["rows"]}
    assert rows[0]["checkpoint"] == str(start) and rows[0]["kl_to_start"] == 0.0
    assert rows[1]["checkpoint"] == str(candidate) and rows[3]["checkpoint"] == str(out / "ckpt" / "x3")
    assert 0.0 < rows[1]["kl_to_start"] < rows[3]["kl_to_start"]  # three times the step moves the policy further
    assert all(r["n_runs"] == 1 and 0.0 <= r["overall"] <= 1.0 for r in rows.values())
    assert rows[3]["lr"] == pytest.approx(3e-5)
    assert rows[3]["evaluated"] and rows[3]["kl_to_start"] == pytest.approx(screened["kl_to_start"])
    for name in ("x0", "x1", "x3"):  # every candidate meets the run's held-out suite
        assert (out / name / "heldout" / "SECRET").read_bytes() == layout.heldout_secret.read_bytes()
        assert (out / name / "round_01" / "evaluate" / "aggregate_controller.json").exists()
    assert sorted(p.relative_to(layout.root) for p in layout.root.rglob("*")) == before  # the run is only read
    assert secret == run_secret(layout)

    row_file = out / "x3" / "lr_probe_row.json"
    stamp = row_file.stat().st_mtime_ns
    assert main([*args, "--scales", "3,0.5"]) == 0  # x3 is read back; only x0.5 runs
    assert row_file.stat().st_mtime_ns == stamp
    assert [r["scale"] for r in read_json(out / "lr_probe.json")["rows"]] == [3, 0.5]
    assert (out / "ckpt" / "x0.5" / "model.safetensors").exists()
