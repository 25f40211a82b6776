"""Per-round rows gathered from training-side files only (aggregates, decisions, plans, DONE markers)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bat.curriculum.history import load_best_after, load_decision
from bat.evaluate.aggregate import pct
from bat.evaluate.store import BASE_VARIANT, load_aggregate
from bat.schemas.evaluation import EvalAggregate
from bat.schemas.routing import BestCheckpoint, RoundPlan, RouteDecision
from bat.state.atomic import read_json
from bat.state.layout import RunLayout


@dataclass
class RoundView:
    """Everything the report needs about one round (None where the round has not got that far)."""

    round: int
    controller: EvalAggregate | None
    final: EvalAggregate | None
    decision: RouteDecision | None
    best: BestCheckpoint | None
    plan: RoundPlan | None
    end_of_run: dict[str, EvalAggregate]
    """Split -> aggregate of the `final_test` phase (retained best on the final and test splits), when run."""
    base: EvalAggregate | None = None
    """Round 0 only: the untrained base policy on the controller split (`evaluate.base_model`)."""


def plan_if_written(layout: RunLayout, round_index: int) -> RoundPlan | None:
    """The round plan, or None before the previous round routed."""
    path = layout.plan(round_index)
    return RoundPlan.model_validate(read_json(path)) if path.exists() else None


def round_view(layout: RunLayout, round_index: int) -> RoundView:
    return RoundView(
        round=round_index,
        controller=load_aggregate(layout, round_index, "controller"),
        final=load_aggregate(layout, round_index, "final"),
        decision=load_decision(layout, round_index),
        best=load_best_after(layout, round_index),
        plan=plan_if_written(layout, round_index),
        end_of_run={
            split: agg
            for split in ("final", "test")
            if (agg := load_aggregate(layout, round_index, split, phase="final_test")) is not None
        },
        base=load_aggregate(layout, round_index, "controller", variant=BASE_VARIANT),
    )


def progress_rows(views: list[RoundView]) -> list[dict[str, Any]]:
    """Held-out controller scores in order: the base policy, after SFT (round 0), after each RL round (0-100)."""
    rows = []
    for view in views:
        for label, agg in ((("base policy", view.base),) if view.base is not None else ()) + (
            (("after SFT" if view.round == 0 else f"after RL round {view.round}"), view.controller),
        ):
            if agg is not None:
                rows.append(
                    {
                        "round": view.round,
                        "label": label,
                        "overall": pct(agg.overall),
                        "task": pct(agg.task),
                        "agentic": pct(agg.agentic),
                        "stages": {k: pct(v) for k, v in agg.stages.items()},
                    }
                )
    return rows


def run_views(layout: RunLayout) -> list[RoundView]:
    """Views of every round directory on disk, ascending."""
    return [round_view(layout, r) for r in layout.rounds()]


def run_summary(layout: RunLayout) -> list[dict[str, Any]]:
    """One row per round for `bat status`: Overall/Task/Agentic (0-100), best so far, action, target stage."""
    rows = []
    for view in run_views(layout):
        agg, dec = view.controller, view.decision
        rows.append(
            {
                "round": view.round,
                "overall": pct(agg.overall) if agg else "-",
                "task": pct(agg.task) if agg else "-",
                "agentic": pct(agg.agentic) if agg else "-",
                "best": pct(view.best.score) if view.best else "-",
                "action": dec.action if dec else "-",
                "target": (dec.target_stage or "-") if dec else "-",
                "nulls": len(agg.null_cells) if agg else 0,
            }
        )
    return rows
