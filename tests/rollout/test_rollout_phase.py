"""Rollout and verify phases end to end on a real (tiny) bank, plan and policy, through the phase runner + CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from bat.cli.main import main
from bat.config.root import BatConfig
from bat.orchestrate.runner import run_phase
from bat.rollout.shards import finished_shards, read_breakdown, read_rollouts
from bat.schemas.routing import PlanRow, RoundPlan
from bat.state.atomic import atomic_write_json
from bat.state.layout import RunLayout
from bat.state.markers import read_done
from bat.verify.shards import read_rewards

CFG = {
    "benchmark": {"runtime": "inprocess", "cases_per_instance": 3, "tracks": ["classification"]},
    "bank": {"tasks_per_track": 1, "e2e_per_track": 1},
    "rollout": {
        "k": 2,
        "states_per_shard": 2,
        "no_tool_call": "observe",
        "budgets": {"max_new_tokens_per_turn": 12, "max_assistant_turns": 2, "max_tool_calls": 2},
    },
}


@pytest.fixture(scope="module")
def run(tmp_path_factory, tiny_model):
    from bat.bank.synthesize import synthesize
    from bat.leakage.preflight import scan_and_admit

    cfg = BatConfig.model_validate(CFG)
    layout = RunLayout(tmp_path_factory.mktemp("state") / "run").ensure()
    bank, _ = synthesize(cfg, layout)
    assert scan_and_admit(layout, bank.version, cfg).verdict == "admitted"
    rows = bank.rows()
    picks = [next(r for r in rows if r.stage == s) for s in ("S3", "S1", "E2E")]
    plan = RoundPlan(
        round=1,
        arm="bicurl",
        target_stage="S3",
        mixture={"S-target": 1, "S-mix": 1, "E2E": 1},
        reward_mode="rubric",
        bank_version=bank.version,
        start_checkpoint=str(tiny_model),
        seed=7,
        batches=[
            [PlanRow(state_id=r.state_id, pool=p, stage=r.stage) for r, p in zip(picks, ("S-target", "S-mix", "E2E"))]
        ],
    )
    atomic_write_json(layout.plan(1), plan)
    return cfg, layout, picks


def test_rollout_then_verify_phases(run):
    cfg, layout, picks = run
    result = run_phase(cfg, layout, 1, "rollout")
    assert result.counts["rollouts"] == 6 and result.counts["shards"] == 2 and result.counts["states"] == 3
    records = read_rollouts(layout.phase_dir(1, "rollout"))
    assert [r.state_id for r in records] == [p.state_id for p in picks for _ in range(2)]
    assert {r.pool for r in records} == {"S-target", "S-mix", "E2E"}
    for rec in records:
        assert rec.engine == "hf" and Path(rec.checkpoint).name == "model"
        assert sum(rec.loss_mask) == rec.response_tokens > 0
        assert rec.end_reason in ("max_turns", "max_tool_calls", "done", "context_length")
    done = read_done(layout.phase_dir(1, "rollout"))
    assert done is not None and done.counts["rollouts"] == 6
    # every shard carries the failure breakdown of its rollouts; `bat evaluate explain` reads it
    breakdowns = [read_breakdown(d) for d in finished_shards(layout.phase_dir(1, "rollout"))]
    verdicts = {b.run_id: b for shard in breakdowns for b in shard.runs}
    assert set(verdicts) == {r.rollout_id for r in records}
    for rec in records:
        assert [v.index for v in verdicts[rec.rollout_id].turns] == [t.index for t in rec.turns]
        assert verdicts[rec.rollout_id].end_reason == rec.end_reason
    assert sum(b.summary.runs for b in breakdowns) == 6
    assert main(["evaluate", "explain", str(layout.phase_dir(1, "rollout"))]) == 0
    assert main(["evaluate", "explain", str(layout.phase_dir(1, "rollout")), "--run", records[0].rollout_id]) == 0

    result = run_phase(cfg, layout, 1, "verify")
    rewards = read_rewards(layout.phase_dir(1, "verify"))
    assert [r.rollout_id for r in rewards] == [r.rollout_id for r in records]
    assert result.counts["rewards"] == 6
    for reward in rewards:
        assert reward.reward_version == cfg.verify.reward_version and reward.judge == "none"
        assert (reward.valid and reward.reward is not None and 0.0 <= reward.reward <= 1.0) or reward.invalid_reason
    s1 = [r for r in rewards if r.stage == "S1"]
    assert all({i.item_id for i in r.items} == {c.id for c in picks[1].rubric} for r in s1)

    # the GRPO side can join these shards (contract check with bat.train)
    from bat.train.grpo_data import build_items

    data = build_items(records, rewards, max_seq_len=4096, normalize_std=True, adv_eps=1e-6)
    reward_of = {r.rollout_id: r for r in rewards}
    trainable = {
        rec.rollout_id
        for rec in records
        if rec.valid and reward_of[rec.rollout_id].valid and reward_of[rec.rollout_id].reward is not None
    }
    assert trainable and {item.rollout_id for item in data.items} == trainable
    excluded = sum(v for k, v in data.counts.items() if k.startswith("excluded_"))
    assert data.counts["rollouts"] == data.counts["rewards"] == 6
    assert data.counts["trainable"] + excluded == len(records)
    assert data.counts["groups"] == len({reward_of[i].state_id for i in trainable}) <= 3

    # both phases are now no-ops
    assert run_phase(cfg, layout, 1, "rollout") is None and run_phase(cfg, layout, 1, "verify") is None

    # a lost reward shard is recomputed alone and comes back byte-identical
    import shutil

    from bat.phase.context import PhaseContext
    from bat.verify.phase import run_verify

    shard1 = layout.phase_dir(1, "verify") / "shard_0001"
    before = (shard1 / "rewards.jsonl").read_bytes()
    untouched = (layout.phase_dir(1, "verify") / "shard_0000" / "DONE.json").stat().st_mtime_ns
    shutil.rmtree(shard1)
    run_verify(PhaseContext(config=cfg, layout=layout, round=1, phase="verify"))
    assert (shard1 / "rewards.jsonl").read_bytes() == before
    assert (layout.phase_dir(1, "verify") / "shard_0000" / "DONE.json").stat().st_mtime_ns == untouched


def test_cli_reports_done_and_missing_plan(run, capsys):
    _cfg, layout, _ = run
    sets = [
        "--set",
        "benchmark.runtime=inprocess",
        "--set",
        "benchmark.tracks=[classification]",
        "--set",
        "benchmark.cases_per_instance=3",
    ]
    code = main(["rollout", "--state", str(layout.root), "--round", "1", *sets])
    out = capsys.readouterr().out
    assert code == 0 and "already DONE" in out
    code = main(["verify", "--state", str(layout.root), "--round", "5", *sets])
    out = capsys.readouterr().out
    assert code == 2 and "no round plan for round 5" in out


def test_rescore_reverifies_a_round_without_writing_in_the_run(run, capsys):
    from bat.verify.rescore import compare_signal, rescore_round

    cfg, layout, _ = run
    verify_dir = layout.phase_dir(1, "verify")
    before = {p: p.stat().st_mtime_ns for p in verify_dir.rglob("*")}
    recorded = read_rewards(verify_dir)
    assert recorded, "test_rollout_then_verify_phases runs first and verifies round 1"
    # under the run's own reward config the round's rewards come back exactly
    again = rescore_round(cfg, layout, 1)
    assert [(r.rollout_id, r.reward, r.valid) for r in again] == [(r.rollout_id, r.reward, r.valid) for r in recorded]
    table = compare_signal(recorded, again)
    assert set(table["pools"]) == {r.pool for r in recorded if r.valid}
    assert all(g["recorded"] == g["rescored"] for g in table["groups"])
    sets = ["--set", "benchmark.runtime=inprocess", "--set", "benchmark.tracks=[classification]"]
    sets += ["--set", "benchmark.cases_per_instance=3", "--set", "verify.stage_evidence=trajectory"]
    assert main(["verify", "--state", str(layout.root), "--round", "1", "--rescore", *sets]) == 0
    out = capsys.readouterr().out
    assert "stage_evidence=trajectory" in out and "S-target" in out and " -> [" in out
    assert {p: p.stat().st_mtime_ns for p in verify_dir.rglob("*")} == before  # nothing written in the run
    assert main(["verify", "--state", str(layout.root), "--round", "4", "--rescore", *sets]) == 2
    assert "no round plan for round 4" in capsys.readouterr().out


def test_repeated_plan_rows_keep_their_rollouts_in_one_group():
    from bat.rollout.phase import plan_jobs

    row = lambda s, pool="S-target": PlanRow(state_id=s, pool=pool, stage="S3")  # noqa: E731
    plan = RoundPlan(
        round=1,
        arm="bicurl",
        target_stage="S3",
        mixture={"S-target": 2},
        reward_mode="rubric",
        bank_version=1,
        start_checkpoint="ck",
        seed=1,
        batches=[[row("a"), row("b")], [row("a"), row("c")], [row("a"), row("b")]],
    )
    jobs, repeated = plan_jobs(plan)
    assert [(j.state_id, j.repeats) for j in jobs] == [("a", 3), ("b", 2), ("c", 1)]
    assert repeated == 3
    assert sum(j.repeats for j in jobs) == sum(len(b) for b in plan.batches)  # every listing gets its K rollouts
