"""Outer-loop decisions over score sequences: fallback by consecutive drops, fallback by KL, gate holds, arms."""

import pytest

from bat.config.curriculum import CurriculumConfig, GateConfig
from bat.curriculum.arms import resolve_arm
from bat.curriculum.decide import History, NullCellsError, decide, snapshot
from bat.schemas.evaluation import NullCell

STAGES = ("S1", "S2", "S3", "S4", "S5")


def _run(make_agg, overalls, cfg=None, kls=None):
    """Feed a sequence of controller Overall scores through `decide`, carrying best and history as route does."""
    cfg = cfg if cfg is not None else CurriculumConfig()
    arm = resolve_arm(cfg)
    best, history, decisions = None, History(), []
    for r, overall in enumerate(overalls):
        agg = make_agg(r, overall)
        kl = kls[r] if kls else None
        decision, best = decide(
            round_index=r, arm=arm, cfg=cfg, stage_keys=STAGES, candidate=agg, best=best, history=history, kl=kl
        )
        history = History(previous_overall=overall, drop_counter=decision.drop_counter, previous=snapshot(agg))
        decisions.append(decision)
    return decisions, best


def test_fallback_after_three_consecutive_drops_with_gate_off(make_agg):
    cfg = CurriculumConfig(gate=GateConfig(enabled=False))
    decisions, best = _run(make_agg, [0.40, 0.50, 0.49, 0.48, 0.47, 0.48], cfg)
    assert [d.action for d in decisions] == ["bootstrap", "continue", "continue", "continue", "fallback", "continue"]
    assert [d.drop_counter for d in decisions] == [0, 0, 1, 2, 0, 0]
    fb = decisions[4]
    assert "3 consecutive" in fb.reason
    assert fb.start_checkpoint == "ckpt/r1" == fb.best_checkpoint  # back to theta* (Overall 0.50)
    assert decisions[2].start_checkpoint == "ckpt/r2"  # gate off: the candidate seeds the next round
    assert best.checkpoint == "ckpt/r1"


def test_retain_last_keeps_every_candidate_through_drops_and_kl(make_agg):
    cfg = CurriculumConfig(retain="last")
    decisions, best = _run(make_agg, [0.50, 0.30, 0.20, 0.10], cfg, kls=[None, 0.5, 0.5, 0.5])
    assert [d.action for d in decisions] == ["bootstrap", "continue", "continue", "continue"]
    assert [d.drop_counter for d in decisions] == [0, 1, 2, 3]  # still recorded
    assert best.checkpoint == "ckpt/r3" and decisions[3].start_checkpoint == "ckpt/r3"


def test_fallback_by_drops_with_gate_on(make_agg):
    decisions, best = _run(make_agg, [0.50, 0.45, 0.44, 0.43])
    assert [d.action for d in decisions] == ["bootstrap", "hold", "hold", "fallback"]
    assert all(d.start_checkpoint == "ckpt/r0" for d in decisions[1:])  # held candidates never seed a round
    assert best.checkpoint == "ckpt/r0"


def test_fallback_by_kl_even_when_the_gate_would_pass(make_agg):
    decisions, best = _run(make_agg, [0.40, 0.45, 0.50], kls=[None, 0.05, 0.25])
    assert [d.action for d in decisions] == ["bootstrap", "promote", "fallback"]
    assert "KL" in decisions[2].reason and decisions[2].kl == 0.25
    assert decisions[2].start_checkpoint == "ckpt/r1" == best.checkpoint
    # KL exactly at tau does not fire
    decisions, _ = _run(make_agg, [0.40, 0.45], kls=[None, 0.1])
    assert decisions[1].action == "promote"


def test_held_gate_routes_to_largest_regression(make_agg):
    cfg = CurriculumConfig()
    arm = resolve_arm(cfg)
    base = {"S1": 0.6, "S2": 0.6, "S3": 0.6, "S4": 0.2, "S5": 0.6}
    r0 = make_agg(0, 0.5, stages=base)
    d0, best = decide(round_index=0, arm=arm, cfg=cfg, stage_keys=STAGES, candidate=r0, best=None, history=History())
    assert (d0.action, d0.target_stage, d0.rule) == ("bootstrap", "S4", "lowest")
    assert d0.mixture == {"S-target": 4, "S-mix": 2, "E2E": 2}
    r1 = make_agg(1, 0.45, stages={**base, "S3": 0.5, "S4": 0.25})
    d1, best1 = decide(
        round_index=1,
        arm=arm,
        cfg=cfg,
        stage_keys=STAGES,
        candidate=r1,
        best=best,
        history=History(previous_overall=0.5, previous=snapshot(r0)),
    )
    assert d1.action == "hold" and "overall_drop" in d1.reason
    assert (d1.target_stage, d1.rule) == ("S3", "largest_regression")
    assert best1 == best and d1.start_checkpoint == "ckpt/r0"
    assert d1.gate is not None and not d1.gate.passed


def test_null_cells_stop_routing(make_agg):
    agg = make_agg(0, 0.5).model_copy(
        update={"routable": False, "null_cells": [NullCell(track="detection", repeat=3, field="S2")]}
    )
    with pytest.raises(NullCellsError, match="detection#3:S2"):
        decide(
            round_index=0,
            arm=resolve_arm(CurriculumConfig()),
            cfg=CurriculumConfig(),
            stage_keys=STAGES,
            candidate=agg,
            best=None,
            history=History(),
        )


def test_baseline_arms(make_agg):
    grpo = CurriculumConfig(arm="grpo")
    d, _ = _run(make_agg, [0.4], grpo)
    assert (d[0].target_stage, d[0].rule, d[0].mixture) == (None, "single_pool", {"E2E": 8})
    assert resolve_arm(grpo).reward_mode == "final"
    sft = CurriculumConfig(arm="sft")
    d, _ = _run(make_agg, [0.4], sft)
    assert d[0].next_round is None and d[0].start_checkpoint is None and d[0].mixture == {}
    ablation = CurriculumConfig(pools=("S-target", "E2E"))
    d, _ = _run(make_agg, [0.4], ablation)
    assert d[0].mixture == {"S-target": 5, "E2E": 3}


def test_config_errors_list_valid_values():
    with pytest.raises(ValueError, match="valid"):
        CurriculumConfig(rho={"S-target": 1.0, "bogus": 1.0})
    with pytest.raises(ValueError, match="E2E"):
        CurriculumConfig(arm="grpo", pools=("S-target",))


def test_pinned_target_stage_overrides_the_router_in_every_round(make_agg):
    cfg = CurriculumConfig(target_stage="S1", gate=GateConfig(enabled=False))
    arm = resolve_arm(cfg)
    stages = {"S1": 0.6, "S2": 0.6, "S3": 0.6, "S4": 0.2, "S5": 0.0}  # the router would pick S5
    r0 = make_agg(0, 0.5, stages=stages)
    d0, best = decide(round_index=0, arm=arm, cfg=cfg, stage_keys=STAGES, candidate=r0, best=None, history=History())
    assert (d0.target_stage, d0.rule) == ("S1", "pinned")
    r1 = make_agg(1, 0.4, stages={**stages, "S1": 0.1})
    d1, _ = decide(round_index=1, arm=arm, cfg=cfg, stage_keys=STAGES, candidate=r1, best=best, history=History())
    assert (d1.target_stage, d1.rule) == ("S1", "pinned")


def test_pinned_target_stage_must_be_a_configured_stage():
    from bat.config.load import load_config

    with pytest.raises(ValueError, match=r"curriculum.target_stage: unknown stage 'S9'; valid: \['S1'"):
        load_config(None, ["curriculum.target_stage=S9"])
    assert load_config(None, ["curriculum.target_stage=S2"]).curriculum.target_stage == "S2"
