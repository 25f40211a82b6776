"""The route phase end to end on disk: aggregates -> decision, best.json, next plan, report + plots (under the guard)."""

import pytest
from curriculum_helpers import build_agg, make_bank

from bat.config.root import BatConfig
from bat.curriculum.decide import NullCellsError
from bat.curriculum.phase import run_route
from bat.evaluate.store import write_aggregate
from bat.orchestrate.runner import run_phase
from bat.phase.context import PhaseContext
from bat.phase.guard import guard_phase
from bat.schemas.evaluation import NullCell
from bat.schemas.routing import RoundPlan
from bat.state.atomic import read_json
from bat.state.layout import RunLayout


@pytest.fixture
def layout(tmp_path):
    return make_bank(RunLayout(tmp_path / "run").ensure())


CFG = BatConfig.model_validate({"run": {"rounds": 3}, "curriculum": {"batches_per_round": 2}})
S = {"S1": 0.6, "S2": 0.6, "S3": 0.3, "S4": 0.6, "S5": 0.6}


def _route(layout, r):
    """Route round r through the phase runner (under the held-out guard; it writes the round report); a round
    already routed runs the phase function again (re-routing is idempotent)."""
    result = run_phase(CFG, layout, r, "route")
    if result is not None:
        return result
    ctx = PhaseContext(config=CFG, layout=layout, round=r, phase="route")
    with guard_phase(ctx):  # route must not touch the held-out side
        return run_route(ctx)


def test_route_rounds_write_decisions_plans_best_and_reports(layout):
    overalls = [0.40, 0.50, 0.30, 0.52]
    for r, overall in enumerate(overalls):
        write_aggregate(layout, build_agg(r, overall, stages=S))
        result = _route(layout, r)
        assert result.extra["action"] == ["bootstrap", "promote", "hold", "promote"][r]
    d2 = read_json(layout.phase_dir(2, "route") / "decision.json")
    assert d2["start_checkpoint"] == "ckpt/r1" and d2["gate"]["passed"] is False
    plan = RoundPlan.model_validate(read_json(layout.plan(3)))
    assert plan.start_checkpoint == "ckpt/r1" and plan.bank_version == 1 and len(plan.batches) == 2
    assert [sum(1 for row in b if row.pool == "S-target") for b in plan.batches] == [4, 4]
    assert all(row.stage == plan.target_stage for b in plan.batches for row in b if row.pool == "S-target")
    assert all(row.stage not in (plan.target_stage, "E2E") for b in plan.batches for row in b if row.pool == "S-mix")
    assert plan.excluded_state_ids == 9  # 25% of 36 rows held back as KL probes
    assert not layout.plan(4).exists()  # round 3 is the last round: no plan beyond it
    best = read_json(layout.best_json)
    assert best["checkpoint"] == "ckpt/r3" and best["score"] == pytest.approx(0.52)
    md = layout.report_md(3).read_text()
    assert "## Decision" in md and "52.0" in md and "promote" in md
    for name in ("overall.png", "stages.png"):
        assert (layout.round_dir(3) / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = read_json(layout.report_json(2))
    assert report["decision"]["action"] == "hold" and report["leakage"]["verdict"] == "admitted"
    assert "KL not measured" in layout.events_log.read_text()
    # re-running a routed round is idempotent
    again = _route(layout, 2)
    assert again.extra["action"] == "hold" and read_json(layout.phase_dir(2, "route") / "decision.json") == d2


def test_each_plan_pins_the_newest_admitted_bank_and_the_report_names_it(layout):
    """A refreshed bank version is pinned only once the leakage scan admitted it; each round's report names the
    version its plan pinned."""
    write_aggregate(layout, build_agg(0, 0.4, stages=S))
    _route(layout, 0)
    make_bank(layout)  # the refresh beside round 1: v0002, not yet scanned
    layout.bank_version(2).admitted_marker.unlink()
    write_aggregate(layout, build_agg(1, 0.5, stages=S))
    _route(layout, 1)
    layout.bank_version(2).admitted_marker.write_text("")  # the scan admits it
    write_aggregate(layout, build_agg(2, 0.55, stages=S))
    _route(layout, 2)
    assert [RoundPlan.model_validate(read_json(layout.plan(r))).bank_version for r in (1, 2, 3)] == [1, 1, 2]
    write_aggregate(layout, build_agg(3, 0.6, stages=S))
    _route(layout, 3)
    for r, version in ((1, 1), (2, 1), (3, 2)):
        assert read_json(layout.report_json(r))["leakage"]["bank_version"] == version
        assert f"* bank version: {version}; leakage: verdict=admitted" in layout.report_md(r).read_text()


def test_route_stops_on_null_cells(layout):
    agg = build_agg(0, 0.4).model_copy(
        update={"routable": False, "null_cells": [NullCell(track="detection", repeat=1, field="task")]}
    )
    write_aggregate(layout, agg)
    with pytest.raises(NullCellsError, match="detection#1:task"):
        _route(layout, 0)
    assert "STOP" in layout.round_events(0).read_text()
    assert not layout.plan(1).exists()


def test_route_needs_the_evaluation(layout):
    with pytest.raises(FileNotFoundError, match="evaluate phase"):
        _route(layout, 0)


def test_a_domain_shift_focuses_the_next_round_on_the_shifted_track(layout):
    write_aggregate(layout, build_agg(0, 0.5))
    _route(layout, 0)
    tracks = {"classification": 0.3, "detection": 0.7, "segmentation": 0.7}  # the mean rises, one track collapses
    write_aggregate(layout, build_agg(1, 0.57, tracks=tracks))
    _route(layout, 1)
    decision = read_json(layout.round(1).decision)
    assert decision["domain_shift"]["detected"] and decision["domain_shift"]["shifted_tracks"] == ["classification"]
    assert "['classification']" in decision["shift_response"]
    assert "bank refresh" not in decision["shift_response"]  # orchestrate.bank_refresh is off: no refresh to name
    plan = RoundPlan.model_validate(read_json(layout.plan(2)))
    assert plan.focus_tracks and all(t == ["classification"] for t in plan.focus_tracks.values())
    assert "* shift response: next round draws" in layout.report_md(1).read_text()


def test_shift_response_report_leaves_the_plan_unfocused(layout):
    cfg = BatConfig.model_validate(
        {"run": {"rounds": 3}, "curriculum": {"batches_per_round": 2, "shift_response": "report"}}
    )
    for r, tracks in enumerate(({}, {"classification": 0.3, "detection": 0.7, "segmentation": 0.7})):
        write_aggregate(layout, build_agg(r, 0.5 if r == 0 else 0.57, tracks=tracks or None))
        run_phase(cfg, layout, r, "route")
    assert read_json(layout.round(1).decision)["shift_response"].startswith("reported only")
    assert RoundPlan.model_validate(read_json(layout.plan(2))).focus_tracks == {}


def test_the_shift_response_names_a_steered_refresh_beside_the_next_round(layout):
    cfg = BatConfig.model_validate(
        {"run": {"rounds": 3}, "curriculum": {"batches_per_round": 2}, "orchestrate": {"bank_refresh": True}}
    )
    for r, tracks in enumerate(({}, {"classification": 0.3, "detection": 0.7, "segmentation": 0.7})):
        write_aggregate(layout, build_agg(r, 0.5 if r == 0 else 0.57, tracks=tracks or None))
        run_phase(cfg, layout, r, "route")
    response = read_json(layout.round(1).decision)["shift_response"]
    assert "['classification']" in response and "bank refresh" in response
    assert f"* shift response: {response}" in layout.report_md(1).read_text()


def test_a_pool_that_cycles_is_logged_where_the_round_is_read(layout):
    write_aggregate(layout, build_agg(0, 0.4, stages=S))
    _route(layout, 0)
    plan = RoundPlan.model_validate(read_json(layout.plan(1)))
    cycled = sorted(pool for pool, n in plan.passes.items() if n > 1)
    events = layout.round_events(0).read_text()
    for pool in plan.passes:
        assert (f"pool {pool} holds fewer rows than the round draws" in events) == (pool in cycled)
    big = BatConfig.model_validate({"run": {"rounds": 3}, "curriculum": {"batches_per_round": 40}})
    write_aggregate(layout, build_agg(1, 0.5, stages=S))
    run_route(PhaseContext(config=big, layout=layout, round=1, phase="route"))
    plan2 = RoundPlan.model_validate(read_json(layout.plan(2)))
    assert all(n > 1 for n in plan2.passes.values())  # 40 batches draw more than any pool holds
    events = layout.round_events(1).read_text()
    assert all(f"pool {pool} holds fewer rows than the round draws" in events for pool in plan2.passes)
    assert "rows repeat within the round (curriculum.exhausted = cycle" in events
