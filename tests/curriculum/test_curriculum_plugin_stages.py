"""The outer loop on a benchmark of another shape: sqlqa (4 stages inspect/draft/validate/submit, tracks
count/total/join). Config, router, mixture, gate, fallback, shift detector, plan, round report and plots take its
stage keys and tracks from the benchmark."""

import pytest
from curriculum_helpers import build_agg, make_bank

from bat.config import ConfigError, parse_config
from bat.config.root import BatConfig
from bat.curriculum.arms import resolve_arm
from bat.curriculum.decide import History, decide, snapshot
from bat.curriculum.phase import run_route
from bat.evaluate.store import write_aggregate
from bat.orchestrate.runner import run_phase
from bat.phase.context import PhaseContext
from bat.phase.guard import guard_phase
from bat.schemas.routing import RoundPlan
from bat.staged.registry import load
from bat.state.atomic import read_json
from bat.state.layout import RunLayout

BENCH = load("sqlqa")
KEYS = tuple(s.key for s in BENCH.stages())
TRACKS = tuple(BENCH.tracks())
CFG = BatConfig.model_validate(
    {"benchmark": {"name": "sqlqa"}, "run": {"rounds": 3}, "curriculum": {"batches_per_round": 2}}
)


def _agg(r, overall, stages=None, tracks=None):
    return build_agg(r, overall, stages=stages, tracks=tracks, keys=KEYS, track_names=TRACKS)


def test_the_benchmark_has_another_shape_and_the_config_takes_it():
    assert KEYS == ("inspect", "draft", "validate", "submit") and TRACKS == ("count", "total", "join")
    assert CFG.stage_keys == KEYS and CFG.benchmark.tracks == TRACKS
    assert CFG.curriculum.gate.late_stages == KEYS[2:]
    assert sum(CFG.stage_weights.values()) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"benchmark": {"name": "sqlqa", "tracks": ["vqa"]}}, "valid: ['count', 'total', 'join']"),
        (
            {"benchmark": {"name": "sqlqa"}, "curriculum": {"gate": {"late_stages": ["S3"]}}},
            "unknown stages ['S3']; valid: ['inspect', 'draft', 'validate', 'submit']",
        ),
        ({"curriculum": {"gate": {"late_stages": ["validate"]}}}, "valid: ['S1', 'S2', 'S3', 'S4', 'S5']"),
    ],
)
def test_config_check_lists_the_benchmarks_own_names(override, message):
    with pytest.raises(ConfigError) as info:
        parse_config(override, "run.yaml")
    assert "run.yaml" in str(info.value) and message in str(info.value)


@pytest.fixture
def layout(tmp_path):
    return make_bank(RunLayout(tmp_path / "run").ensure(), per_stage=12, stages=KEYS, tracks=TRACKS)


def _route(layout, r):
    result = run_phase(CFG, layout, r, "route")
    if result is not None:
        return result
    ctx = PhaseContext(config=CFG, layout=layout, round=r, phase="route")
    with guard_phase(ctx):
        return run_route(ctx)


def test_route_plan_gate_shift_and_report_name_the_benchmarks_stages_and_tracks(layout):
    base = {"inspect": 0.6, "draft": 0.3, "validate": 0.6, "submit": 0.6}
    write_aggregate(layout, _agg(0, 0.4, stages=base))
    assert _route(layout, 0).extra["action"] == "bootstrap"
    d0 = read_json(layout.round(0).decision)
    assert (d0["target_stage"], d0["rule"]) == ("draft", "lowest")
    plan = RoundPlan.model_validate(read_json(layout.plan(1)))
    rows = [row for batch in plan.batches for row in batch]
    assert {row.stage for row in rows if row.pool == "S-target"} == {"draft"}
    assert {row.stage for row in rows if row.pool == "S-mix"} <= {"inspect", "validate", "submit"}
    assert {row.stage for row in rows if row.pool == "E2E"} == {"E2E"}

    # round 1: Overall rises but a late stage (validate) drops: the gate holds and the router goes to the regression
    write_aggregate(layout, _agg(1, 0.5, stages={**base, "draft": 0.6, "validate": 0.5}))
    assert _route(layout, 1).extra["action"] == "hold"
    d1 = read_json(layout.round(1).decision)
    checks = {c["name"]: c["passed"] for c in d1["gate"]["checks"]}
    assert checks["late_stage_drop:validate"] is False and checks["late_stage_drop:submit"] is True
    assert not any(name.startswith("late_stage_drop:") and name[16:] in KEYS[:2] for name in checks)
    assert (d1["target_stage"], d1["rule"]) == ("validate", "largest_regression")

    # round 2: the track mean rises while `count` collapses: a domain shift on the benchmark's own track
    tracks = {"count": 0.3, "total": 0.7, "join": 0.7}
    write_aggregate(layout, _agg(2, 0.55, stages=dict.fromkeys(KEYS, 0.6), tracks=tracks))
    _route(layout, 2)
    shift = read_json(layout.round(2).decision)["domain_shift"]
    assert shift["detected"] and shift["shifted_tracks"] == ["count"] and set(shift["track_deltas"]) == set(TRACKS)
    plan3 = RoundPlan.model_validate(read_json(layout.plan(3)))
    assert plan3.focus_tracks and all(t == ["count"] for t in plan3.focus_tracks.values())

    md = layout.report_md(1).read_text()
    for key in KEYS:
        assert f"| {key} | " in md
    for track in TRACKS:
        assert f"| {track} | " in md
    assert "late_stage_drop:validate" in md and "target stage: validate" in md
    assert "| S1 |" not in md
    assert (layout.round_dir(1) / "stages.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_fallback_after_consecutive_drops_on_the_benchmarks_stages():
    arm = resolve_arm(CFG.curriculum)
    best, history, actions = None, History(), []
    for r, overall in enumerate([0.50, 0.45, 0.44, 0.43]):
        agg = _agg(r, overall)
        decision, best = decide(
            round_index=r, arm=arm, cfg=CFG.curriculum, stage_keys=KEYS, candidate=agg, best=best, history=history
        )
        history = History(previous_overall=overall, drop_counter=decision.drop_counter, previous=snapshot(agg))
        actions.append((decision.action, decision.target_stage))
    assert [a for a, _ in actions] == ["bootstrap", "hold", "hold", "fallback"]
    assert all(target in KEYS for _, target in actions) and best.checkpoint == "ckpt/r0"
