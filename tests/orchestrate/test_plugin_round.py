"""A whole run on the second shipped benchmark (`sqlqa`) with the tiny test model through the local executor: the
bootstrap (synthesize, scan, sft, evaluate, route) and round 1 (rollout, verify, grpo, evaluate, route), every phase
on the benchmark's own stages through `bat.staged.interface` (configs/smoke.yaml's sizes)."""

import json

import pytest

from bat.bank.store import open_bank
from bat.orchestrate import driver
from bat.phase.plan import load_plan
from bat.rollout.shards import finished_shards, read_shard
from bat.schemas.rollout import RewardRecord
from bat.state.jsonl import read_jsonl
from bat.state.layout import RunLayout

STAGES = ["inspect", "draft", "validate", "submit"]
PHASES = {0: ("synthesize", "scan", "sft", "evaluate", "route"), 1: ("rollout", "verify", "grpo", "evaluate", "route")}


@pytest.mark.slow
def test_a_whole_round_on_sqlqa_through_the_local_executor(tmp_path, plugin_smoke):
    cfg = plugin_smoke()
    assert cfg.stage_keys == tuple(STAGES)
    layout = RunLayout(tmp_path / "run")
    assert driver.run(cfg, layout) == 0
    for round_index, phases in PHASES.items():
        for phase in phases:
            assert (layout.phase_dir(round_index, phase) / "DONE.json").is_file(), (round_index, phase)
    bank = open_bank(layout)
    assert bank.manifest().stages == STAGES
    plan = load_plan(layout, 1)
    planned = {row.stage for batch in plan.batches for row in batch}
    assert planned and planned <= {*STAGES, "E2E"}
    rollouts = [r for shard in finished_shards(layout.phase_dir(1, "rollout")) for r in read_shard(shard)]
    assert rollouts and {r.stage for r in rollouts} == planned
    rewards = [
        RewardRecord.model_validate(r)
        for path in sorted(layout.phase_dir(1, "verify").glob("shard_*/rewards.jsonl"))
        for r in read_jsonl(path)
    ]
    assert len(rewards) == len(rollouts) and any(r.valid for r in rewards)
    assert all(0.0 <= r.reward <= 1.0 for r in rewards if r.valid)
    for round_index in PHASES:
        agg = json.loads((layout.phase_dir(round_index, "evaluate") / "aggregate_controller.json").read_text())
        assert sorted(agg["stages"]) == sorted(STAGES) and agg["n_runs"] == 3
        report = layout.report_md(round_index).read_text()
        assert all(stage in report for stage in STAGES)
        assert not any(f"| S{i} " in report for i in range(1, 6))
        for plot in ("overall.png", "stages.png"):
            assert (layout.report_md(round_index).parent / plot).stat().st_size > 0


@pytest.mark.slow
def test_an_online_grpo_round_on_sqlqa(tmp_path, plugin_smoke):
    """configs/sqlqa.yaml's round mode (`grpo.rollouts: online`: every step rolls out bank states from the current
    weights and rewards them with the replaying verifier), in-process at smoke sizes."""
    cfg = plugin_smoke("debug")
    cfg = cfg.model_copy(update={"grpo": cfg.grpo.model_copy(update={"rollouts": "online", "steps": 2})})
    layout = RunLayout(tmp_path / "run")
    assert driver.run(cfg, layout) == 0
    for phase in PHASES[1]:
        assert (layout.phase_dir(1, phase) / "DONE.json").is_file(), phase
    steps = [json.loads(line) for line in (layout.phase_dir(1, "grpo") / "metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2]
    assert all(s["rollouts"] > 0 and s["rollouts_valid"] == s["rollouts"] for s in steps)  # every reward valid
