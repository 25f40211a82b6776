"""The `route` phase: aggregates -> auditable decision, retained best, next round's plan, round report.

Reads `round_NN/evaluate/aggregate_controller.json` and the previous round's route outputs (never the held-out
side); writes `round_NN/route/decision.json`, `round_NN/route/best.json`, `checkpoints/best.json`,
`round_{NN+1}/plan.json` and the round report.
"""

from __future__ import annotations

from pathlib import Path

from bat.curriculum.arms import ArmSpec, resolve_arm
from bat.curriculum.decide import NullCellsError, decide, snapshot
from bat.curriculum.history import best_after_path, decision_path, previous_state, training_health
from bat.curriculum.kl import measure_kl
from bat.curriculum.plan import build_plan
from bat.evaluate.store import aggregate_path, load_aggregate
from bat.phase.context import PhaseContext, PhaseResult
from bat.phase.events import log_event
from bat.phase.guard import guard_phase
from bat.phase.spec import Maybe, PhaseSpec, first_bank
from bat.schemas.routing import BestCheckpoint, RouteDecision
from bat.state.atomic import atomic_write_json
from bat.state.checkpoints import write_best


def _write_plan(ctx: PhaseContext, decision, arm) -> Path:
    from bat.bank.store import open_bank

    bank = open_bank(ctx.layout)
    rows = bank.rows()
    plan = build_plan(
        decision,
        arm,
        ctx.config.curriculum,
        index=bank.index(),
        stage_of={r.state_id: r.stage for r in rows},
        bank_version=bank.version,
        run_seed=ctx.config.run.seed,
    )
    for pool, passes in sorted(plan.passes.items()):
        if passes > 1:  # the documented fallback of curriculum.exhausted = cycle, said where users look
            log_event(
                ctx.layout,
                ctx.round,
                "route",
                f"round {plan.round}: pool {pool} holds fewer rows than the round draws "
                f"({plan.mixture.get(pool, 0)} x {len(plan.batches)} batches): drawn in {passes} permutations, so "
                "rows repeat within the round (curriculum.exhausted = cycle; `error` refuses instead)",
            )
    return atomic_write_json(ctx.layout.plan(plan.round), plan)


def run_route(ctx: PhaseContext) -> PhaseResult:
    """Decide round `ctx.round` from aggregates only; schedule round + 1 unless the run ends here.

    Runs under the held-out guard: any attempt to open `heldout/` from here raises `HeldoutAccessError`.
    """
    with guard_phase(ctx):
        return _route(ctx)


def _write_decision(ctx: PhaseContext, decision: RouteDecision, new_best: BestCheckpoint, arm: ArmSpec) -> list[Path]:
    """Write the round's decision.json and best.json, the run's checkpoints/best.json and, unless the run ends
    here, the next round's plan; returns the paths written."""
    layout, r = ctx.layout, ctx.round
    outputs = [
        atomic_write_json(decision_path(layout, r), decision),
        atomic_write_json(best_after_path(layout, r), new_best),
    ]
    write_best(
        layout.best_json,
        Path(new_best.checkpoint),
        round_index=new_best.round,
        score=new_best.score,
        extra=new_best.model_dump(mode="json", exclude={"checkpoint", "round", "score"}),
    )
    outputs.append(layout.best_json)
    if decision.next_round is not None:
        outputs.append(_write_plan(ctx, decision, arm))
    return outputs


def _route(ctx: PhaseContext) -> PhaseResult:
    """Read the controller aggregate and the previous route state, decide, write the outputs, log the action."""
    cfg, layout, r = ctx.config, ctx.layout, ctx.round
    agg = load_aggregate(layout, r, "controller")
    if agg is None:
        raise FileNotFoundError(
            f"no controller aggregate at {aggregate_path(layout, r, 'controller')}; run the evaluate phase first"
        )
    arm = resolve_arm(cfg.curriculum)
    best, history = previous_state(layout, r)
    try:
        snapshot(agg)
    except NullCellsError as exc:
        log_event(layout, r, "route", f"STOP: {exc}")
        raise
    kl = measure_kl(ctx, agg.checkpoint, best) if best is not None and arm.rl else None
    decision, new_best = decide(
        round_index=r,
        arm=arm,
        cfg=cfg.curriculum,
        stage_keys=cfg.stage_keys,
        candidate=agg,
        best=best,
        history=history,
        kl=kl,
        health=training_health(layout, r),
        last_round=r >= cfg.run.rounds,
        refresh_steered=cfg.orchestrate.bank_refresh and cfg.bank.refresh_steering == "weakness",
    )
    outputs = _write_decision(ctx, decision, new_best, arm)
    log_event(
        layout,
        r,
        "route",
        f"{decision.action}: {decision.reason}; target={decision.target_stage} "
        f"rule={decision.rule} start={decision.start_checkpoint}",
    )
    counts = {"drop_counter": decision.drop_counter, "overall": agg.overall or 0.0}
    if kl is not None:
        counts["kl"] = kl
    return PhaseResult(
        outputs=outputs,
        inputs=[aggregate_path(layout, r, "controller")],
        counts=counts,
        extra={
            "action": decision.action,
            "target_stage": decision.target_stage,
            "rule": decision.rule,
            "next_round": decision.next_round,
        },
    )


ROUTE = PhaseSpec(
    "route",
    run_route,
    reads=lambda L, r: (
        L.round(r).aggregate("controller"),
        L.round(r - 1).decision,
        L.round(r - 1).best_after,
        first_bank(L).rl_index,
    ),
    writes=lambda L, r: (
        L.round(r).decision,
        L.round(r).best_after,
        L.best_json,
        Maybe(L.plan(r + 1), "the run goes on to round r+1"),
        L.report_md(r),
        L.report_json(r),
    ),
    resources="route",
    writes_report=True,
)
