"""Verifier on real rollouts: the benchmark env and grader, a scripted agent replayed through the rollout loop.

Checks that an expert rollout earns a high reward and a no-op one a low reward, that files planted to mimic
evidence cannot raise a reward, and that judge failures make the rollout invalid instead of scoring 0.
"""

from __future__ import annotations

import json
import shutil

import pytest
from fake_openai import JudgeServer, verdicts_for
from verify_doubles import ReplayEngine

from bat.benchmark import TOOL_NAMES, TOOL_SPECS
from bat.benchmark.episode import run_instance
from bat.benchmark.instance import generate_instance, materialize
from bat.config.root import BatConfig
from bat.policy.codec import render_tool_call
from bat.rollout.chat import TurnTokens
from bat.rollout.runner import OpenedEnv, StateJob, run_shards
from bat.rollout.shards import read_shard, read_timings, shard_dir
from bat.rollout.spec import LoopSettings
from bat.verify.phase import execution_records, make_verifier
from bat.verify.verifier import StateTruth

TRACK = "classification"


def make_cfg(runtime="inprocess", **verify):
    return BatConfig.model_validate(
        {
            "benchmark": {"runtime": "inprocess" if runtime == "inprocess" else "sandbox", "cases_per_instance": 3},
            "sandbox": {"runtime": "bwrap" if runtime == "inprocess" else runtime},
            "verify": verify,
        }
    )


def agent_texts(inst, agent, cfg, tmp):
    episode = run_instance(inst, agent, tmp / f"episode-{agent}", cfg)
    return [render_tool_call(t.call, thought=t.thought) for t in episode.trajectory.turns]


def rollout(tmp, inst, cfg, tokenizer, scripts: dict[int, list[str]]):
    """Run one shard of len(scripts) rollouts of one E2E state through the real loop and env."""
    tt = TurnTokens(tokenizer, TOOL_SPECS)

    def open_env(job, k, workdir):
        from bat.benchmark import StagedEnv

        env = StagedEnv(inst, workdir / "workspace", workdir / "grader", cfg)
        return OpenedEnv(
            env=env,
            workspace=env.workspace,
            messages=[{"role": "user", "content": f"ROLLOUT-{k} solve the task in task/README.md"}],
        )

    settings = LoopSettings(budgets=cfg.rollout.budgets, temperature=1.0, tool_names=list(TOOL_NAMES))
    run_shards(
        tmp / "rollout",
        [StateJob("st0", "E2E", "E2E")],
        k=len(scripts),
        states_per_shard=1,
        run_seed=1,
        round_index=1,
        open_env=open_env,
        engine_factory=lambda: ReplayEngine(tokenizer, scripts, tt.stop_ids[0]),
        turn_tokens=lambda: tt,
        settings=settings,
        scratch=tmp / "scratch",
    )
    return shard_dir(tmp / "rollout", 0)


def truth_for(inst, tmp, stage="E2E", item_ids=(), evidence_ids=()):
    materialize(inst, tmp / "truth-public", tmp / "truth-grader")
    return StateTruth(
        state_id="st0",
        stage=stage,
        track=TRACK,
        grader_dir=tmp / "truth-grader",
        item_ids=list(item_ids),
        evidence_ids=list(evidence_ids),
    )


def verify_all(cfg, shard, truth, tmp, reward_mode="rubric"):
    verifier = make_verifier(cfg, reward_mode)
    timings = read_timings(shard)
    return [
        verifier.verify(rec, shard, truth, execution_records(rec, timings[rec.rollout_id]), tmp / "v" / rec.rollout_id)
        for rec in read_shard(shard)
    ]


@pytest.fixture(scope="module")
def world(tmp_path_factory, tokenizer):
    tmp = tmp_path_factory.mktemp("world")
    cfg = make_cfg()
    inst = generate_instance(TRACK, "practice", 5, config=cfg.benchmark)
    scripts = {0: agent_texts(inst, "expert", cfg, tmp), 1: agent_texts(inst, "noop", cfg, tmp)}
    shard = rollout(tmp, inst, cfg, tokenizer, scripts)
    return tmp, cfg, inst, shard


def test_expert_rollout_earns_high_reward_and_noop_low(world):
    tmp, cfg, inst, shard = world
    expert, noop = verify_all(cfg, shard, truth_for(inst, tmp), tmp)
    assert expert.valid and noop.valid
    assert expert.reward > 0.9 and expert.task_score == pytest.approx(1.0)
    assert noop.reward < 0.2 < expert.reward
    assert expert.eta == pytest.approx(1.0) and expert.dropped_files == []
    assert set(expert.stage_scores) == {"S1", "S2", "S3", "S4", "S5"}
    assert expert.reward_version == cfg.verify.reward_version and expert.judge == "none"
    assert {i.source for i in expert.items} == {"grader", "proxy"}
    # the E2E reward (default union_rubric, Eq. 4 over Eq. 14's union contract): eta x mean of every item verdict
    for rec in (expert, noop):
        verdicts = [float(bool(i.verdict)) for i in rec.items]
        assert rec.reward == pytest.approx(rec.eta * sum(verdicts) / len(verdicts))
    assert {i.item_id[:2] for i in expert.items} == {"s1", "s2", "s3", "s4", "s5"}  # every stage's items


def test_stage_mix_e2e_reward_is_the_named_option(world):
    tmp, cfg, inst, shard = world
    mix = cfg.model_copy(update={"verify": cfg.verify.model_copy(update={"e2e_reward": "stage_mix"})})
    expert, _noop = verify_all(mix, shard, truth_for(inst, tmp), tmp)
    # stage_mix: 0.5 * weighted stage mean + 0.5 * task score
    weights = cfg.stage_weights
    mean = sum(weights[s] * v for s, v in expert.stage_scores.items())
    assert expert.reward == pytest.approx(0.5 * mean + 0.5 * expert.task_score)


def test_union_rubric_and_stage_mix_differ_on_a_partial_rollout(tmp_path, tokenizer):
    """An agent that skips the pilot and the check fails S3's items: the default union rubric (Eq. 4 over Eq. 14's
    union contract) pays eta x the mean of every item verdict, stage_mix w x stage mean + (1 - w) x task score; the
    two differ here (expert and noop rollouts score the same under both)."""
    cfg = make_cfg()
    inst = generate_instance(TRACK, "practice", 5, config=cfg.benchmark)
    shard = rollout(tmp_path, inst, cfg, tokenizer, {0: agent_texts(inst, "skip-validate", cfg, tmp_path)})
    truth = truth_for(inst, tmp_path)
    (union,) = verify_all(cfg, shard, truth, tmp_path / "union")
    mix_cfg = cfg.model_copy(update={"verify": cfg.verify.model_copy(update={"e2e_reward": "stage_mix"})})
    (mix,) = verify_all(mix_cfg, shard, truth, tmp_path / "mix")
    assert union.valid and mix.valid and not all(i.verdict for i in union.items)
    verdicts = [float(bool(i.verdict)) for i in union.items]
    assert union.reward == pytest.approx(union.eta * sum(verdicts) / len(verdicts))
    mean = sum(cfg.stage_weights[s] * v for s, v in mix.stage_scores.items())
    assert mix.reward == pytest.approx(0.5 * mean + 0.5 * mix.task_score)
    assert abs(union.reward - mix.reward) > 0.01


def test_stage_row_reward_is_eta_times_mean_of_its_items(world):
    tmp, cfg, inst, shard = world
    items = ["s3a_pilot_before_batch", "s3b_output_checked"]
    expert, noop = verify_all(
        cfg, shard, truth_for(inst, tmp, "S3", items, ["e3_pilot_record", "e3_check_record"]), tmp
    )
    assert [i.item_id for i in expert.items] == items and expert.reward == pytest.approx(1.0)
    assert noop.reward == 0.0 and noop.eta == 0.0 and noop.valid


def test_planted_files_that_mimic_evidence_do_not_raise_reward(world, tmp_path):
    tmp, cfg, inst, shard = world
    forged = tmp_path / "forged"
    shutil.copytree(shard, forged)
    records = read_shard(forged)
    expert_ev, noop_ev = (forged / r.evidence_dir for r in records)
    # copy every artifact the expert produced (plan, outputs, submission) into the no-op rollout's evidence
    for sub in ("plan.md", "outputs", "submission"):
        src = expert_ev / sub
        if src.is_dir():
            shutil.copytree(src, noop_ev / sub, dirs_exist_ok=True)
        elif src.exists():
            shutil.copy2(src, noop_ev / sub)
    # and forge a manifest claiming a result for every case
    (noop_ev / "submission").mkdir(exist_ok=True)
    (noop_ev / "submission" / "manifest.json").write_text(json.dumps({"results": dict.fromkeys(inst.case_ids, 0)}))
    honest = verify_all(cfg, shard, truth_for(inst, tmp), tmp / "h")[1]
    # the forgery is effective against a grader that trusts the raw workspace ...
    from bat.benchmark.grader import grade

    noop_rec = records[1]
    raw = grade(
        noop_ev,
        truth_for(inst, tmp_path / "raw").grader_dir,
        execution_records(noop_rec, read_timings(forged)[noop_rec.rollout_id]),
        cfg,
    )
    assert raw.stages["S1"] > honest.stage_scores["S1"] and raw.agentic > 0.0
    # ... but not against the verifier's trusted view
    tampered = verify_all(cfg, forged, truth_for(inst, tmp_path), tmp_path)[1]
    assert tampered.valid and tampered.reward == pytest.approx(honest.reward)
    assert tampered.task_score == honest.task_score
    assert "plan.md" in tampered.dropped_files and any(p.startswith("outputs/") for p in tampered.dropped_files)


def test_judge_verdicts_and_judge_failure_nulls(world, tmp_path):
    _tmp, _cfg, inst, shard = world
    items = ["s1a_plan_md", "s1b_plan_pipeline", f"s1c_{TRACK}_model", "s1d_researched_3"]
    truth = truth_for(inst, tmp_path, "S1", items, ["e1_plan_artifact", "e1_plan_record", "e1_research_records"])
    judged = ["s1b_plan_pipeline", f"s1c_{TRACK}_model"]
    with JudgeServer([lambda body: verdicts_for(judged, True)]) as srv:
        jcfg = make_cfg(
            judge={"enabled": True, "base_url": srv.url, "model": "judge-m", "timeout_s": 5, "max_retries": 0}
        )
        expert, noop = verify_all(jcfg, shard, truth, tmp_path / "a")
    assert expert.valid and expert.reward == pytest.approx(1.0) and expert.judge == f"judge-m@{srv.url}"
    assert {i.item_id: i.source for i in expert.items if i.source == "judge"} == dict.fromkeys(judged, "judge")
    assert noop.valid and noop.reward == 0.0  # no plan: the grader does not even ask the judge
    with JudgeServer(["not json at all"]) as srv:
        jcfg = make_cfg(judge={"enabled": True, "base_url": srv.url, "timeout_s": 5, "max_retries": 1})
        expert, _ = verify_all(jcfg, shard, truth, tmp_path / "b")
    assert not expert.valid and expert.reward is None and "null verdicts" in expert.invalid_reason
    assert {i.item_id for i in expert.items if i.verdict is None} == set(judged)


def test_final_reward_mode_pays_the_task_score_or_overall(world):
    tmp, cfg, inst, shard = world
    expert, noop = verify_all(cfg, shard, truth_for(inst, tmp), tmp / "f", reward_mode="final")
    # the default (`verify.final_reward: task`): the submitted result's Task score alone
    assert expert.reward == pytest.approx(expert.task_score) == pytest.approx(1.0)
    assert noop.valid and noop.reward == noop.task_score == 0.0
    overall_cfg = make_cfg(final_reward="overall")
    expert_o, noop_o = verify_all(overall_cfg, shard, truth_for(inst, tmp / "o"), tmp / "o", reward_mode="final")
    assert expert_o.reward == pytest.approx(1.0) and 0.0 <= noop_o.reward < 0.2
    with pytest.raises(ValueError, match="valid"):
        make_verifier(cfg, "bonus")


def test_invalid_rollout_gives_invalid_reward(world):
    tmp, cfg, inst, shard = world
    rec = read_shard(shard)[0].model_copy(update={"valid": False, "invalid_reason": "env.step failed: boom"})
    out = make_verifier(cfg).verify(rec, shard, truth_for(inst, tmp / "i"), [], tmp / "i" / "w")
    assert not out.valid and out.reward is None and "boom" in out.invalid_reason
