"""The training side's view of earlier evaluations that a bank refresh may read: controller aggregates only.

Reads: `round_NN/evaluate/aggregate_controller.json` (`RoundLayout.aggregate("controller")`) — per-stage and
per-track numbers, never runs, transcripts or held-out content. Writes nothing.
"""

from __future__ import annotations

from bat.schemas.evaluation import EvalAggregate
from bat.state.atomic import read_json
from bat.state.layout import RunLayout


def newest_controller_aggregate(layout: RunLayout, refresh: int) -> tuple[int, EvalAggregate] | None:
    """(round, aggregate) of the newest controller aggregate of a round before `refresh`, or None when no round
    before it has one (the bootstrap, refresh 0, never has)."""
    for source in range(refresh - 1, -1, -1):
        path = layout.round(source).aggregate("controller")
        if path.is_file():
            return source, EvalAggregate.model_validate(read_json(path))
    return None
