"""The round plan a training-side phase starts from, and the checkpoint it names (rollout, verify, grpo)."""

from __future__ import annotations

from pathlib import Path

from bat.schemas.routing import RoundPlan
from bat.state.atomic import read_json
from bat.state.layout import RunLayout


def load_plan(layout: RunLayout, round_index: int) -> RoundPlan:
    """The round plan (`round_NN/plan.json`); a missing plan raises naming the file and the rounds that have one."""
    path = layout.plan(round_index)
    if not path.is_file():
        have = [r for r in layout.rounds() if layout.plan(r).is_file()]
        raise FileNotFoundError(f"{path}: no round plan for round {round_index}; rounds with a plan: {have}")
    return read_plan(path)


def resolve_checkpoint(layout: RunLayout, checkpoint: str) -> Path:
    """Absolute path of a checkpoint named in a plan (relative names are under the run root)."""
    path = Path(checkpoint)
    return path if path.is_absolute() else layout.root / path


def plan_start_checkpoint(layout: RunLayout, round_index: int) -> Path:
    """The absolute start checkpoint of round `round_index`'s plan."""
    return resolve_checkpoint(layout, load_plan(layout, round_index).start_checkpoint)


def read_plan(path: str | Path) -> RoundPlan:
    """A round plan file; a missing or invalid one raises naming the file."""
    from pydantic import ValidationError

    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"{file}: no such round plan (round_NN/plan.json)")
    try:
        return RoundPlan.model_validate(read_json(file))
    except (ValidationError, ValueError) as exc:
        raise ValueError(f"{file}: not a valid round plan: {exc}") from None


def plan_batches(plan: RoundPlan) -> list[list[str]]:
    """State ids of each batch of `plan`, in plan order (what one GRPO step trains on)."""
    return [[row.state_id for row in batch] for batch in plan.batches]


def carried_optimizer(layout: RunLayout, round_index: int, start: Path, carry: bool) -> Path | None:
    """Where a round's GRPO block takes its optimizer state from under `grpo.carry_optimizer`: the previous round's
    step checkpoints when the round starts from the previous round's candidate; None (a fresh optimizer) otherwise."""
    if not carry or round_index < 2:
        return None
    previous = round_index - 1
    if Path(start).resolve() != Path(layout.candidate_model(previous)).resolve():
        return None
    return layout.round_checkpoints(previous)
