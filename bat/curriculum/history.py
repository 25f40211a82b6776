"""What routing reads from earlier rounds (training side only): decisions, retained best, training health."""

from __future__ import annotations

import math
from pathlib import Path

from bat.curriculum.decide import History
from bat.schemas.routing import BestCheckpoint, RouteDecision, TrainingHealth
from bat.state.atomic import read_json
from bat.state.layout import RunLayout
from bat.state.markers import read_done

ROUTE_PHASE = "route"


def decision_path(layout: RunLayout, round_index: int) -> Path:
    return layout.round(round_index).decision


def best_after_path(layout: RunLayout, round_index: int) -> Path:
    """The retained best as it stood after round `round_index` (checkpoints/best.json is a copy of the newest)."""
    return layout.round(round_index).best_after


def load_decision(layout: RunLayout, round_index: int) -> RouteDecision | None:
    path = decision_path(layout, round_index)
    return RouteDecision.model_validate(read_json(path)) if path.exists() else None


def load_best_after(layout: RunLayout, round_index: int) -> BestCheckpoint | None:
    path = best_after_path(layout, round_index)
    return BestCheckpoint.model_validate(read_json(path)) if path.exists() else None


def previous_state(layout: RunLayout, round_index: int) -> tuple[BestCheckpoint | None, History]:
    """Best and drop-counter history before `round_index` (from round_index - 1's route outputs).

    Reading the previous round's files (not checkpoints/best.json) keeps a re-run of this round idempotent.
    """
    if round_index == 0:
        return None, History()
    prev = load_decision(layout, round_index - 1)
    best = load_best_after(layout, round_index - 1)
    if prev is None or best is None:
        raise FileNotFoundError(
            f"round {round_index - 1} has no route decision/best under {layout.phase_dir(round_index - 1, ROUTE_PHASE)}; "
            "route rounds in order"
        )
    overall = prev.candidate.overall if prev.candidate else None
    return best, History(previous_overall=overall, drop_counter=prev.drop_counter, previous=prev.candidate)


def training_health(layout: RunLayout, round_index: int) -> TrainingHealth | None:
    """Health of the round's training from the DONE counts of `rollout` and `grpo` (None for round 0).

    Non-finite numbers in grpo counts (or a positive `nonfinite` count) mark unhealthy metrics; aborted
    rollouts are rollout counts `rollouts - valid` (or `invalid` / `aborted` when present) out of `rollouts`.
    """
    if round_index == 0:
        return None
    grpo = read_done(layout.phase_dir(round_index, "grpo"))
    rollout = read_done(layout.phase_dir(round_index, "rollout"))
    if grpo is None and rollout is None:
        return None
    finite = True
    if grpo is not None:
        finite = all(math.isfinite(float(v)) for v in grpo.counts.values()) and not grpo.counts.get("nonfinite", 0)
    counts = rollout.counts if rollout is not None else {}
    total = int(counts.get("rollouts", 0))
    if "valid" in counts:
        aborted = total - int(counts["valid"])
    else:
        aborted = int(counts.get("invalid", counts.get("aborted", 0)))
    return TrainingHealth(metrics_finite=finite, aborted=aborted, total=total, source="DONE counts of rollout/grpo")
