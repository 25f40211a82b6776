"""Trajectory checks and stage boundaries: is a teacher run a valid example of its outcome label, and where
do its stage states start (success: each stage boundary; recovery: right after a failed pilot; failure: the
stage boundaries after a realistic upstream mistake).

Reads only a trajectory's turns (tool names, stage tags, normalised records) and the run's grade.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bat.schemas.bank import TrajectoryTurn

SUCCESS_TASK_MIN = 0.8
"""A success/recovery run must reach at least this task score (0-1); failure runs must stay below it or lose a stage."""


def _name(turn: TrajectoryTurn) -> str | None:
    return turn.call.get("name") if isinstance(turn.call, dict) else None


def failed_pilot_turns(turns: Sequence[TrajectoryTurn]) -> list[int]:
    """Indices of S3 `check_outputs` turns whose check was not clean (the failed pilot was revealed there)."""
    out = []
    for turn in turns:
        if _name(turn) == "check_outputs" and turn.stage == "S3":
            result = turn.record.get("result") or {}
            meta = result.get("meta", {}) if isinstance(result, dict) else {}
            if turn.record.get("ok") is False or meta.get("clean") is False:
                out.append(turn.t)
    return out


def flawed_pilot_turns(turns: Sequence[TrajectoryTurn]) -> list[int]:
    """The S3 `run_model` turns before the first failed pilot check: the mistaken pilot of a recovery run
    (kept as context for later SFT rows, never trained as a target)."""
    failed = failed_pilot_turns(turns)
    if not failed:
        return []
    return [t.t for t in turns if t.t < failed[0] and t.stage == "S3" and _name(t) == "run_model"]


def stage_boundaries(turns: Sequence[TrajectoryTurn], stages: Sequence[str]) -> dict[str, int]:
    """b_{i,s}: index of the first turn tagged with each stage that occurs."""
    out: dict[str, int] = {}
    for turn in turns:
        if turn.stage in stages and turn.stage not in out:
            out[turn.stage] = turn.t
    return out


def check_run(outcome: str, score: Any, turns: Sequence[TrajectoryTurn], stages: Sequence[str]) -> list[str]:
    """Reasons the run is NOT a valid `outcome` example (empty = checked). Every label needs a valid,
    breach-free grade; success needs every stage at 1 and task >= SUCCESS_TASK_MIN; recovery additionally
    needs a failed pilot followed by a clean re-pilot; failure needs a stage below 1 or the task below the bar."""
    problems: list[str] = []
    if score.breach:
        problems.append(f"sandbox breach: {score.breach_reasons}")
    if not score.valid or score.task is None:
        problems.append(f"null cells: {score.null_reasons}")
    if problems:
        return problems
    from bat.benchmark.agents import outcome_of

    graded = outcome_of(score)
    if graded != outcome:
        problems.append(f"the benchmark grades this run as {graded!r}, not {outcome!r}")
    weak = sorted(s for s in stages if s in score.stages and (score.stages[s] or 0.0) < 1.0)
    good = not weak and score.task >= SUCCESS_TASK_MIN
    if outcome in ("success", "recovery") and not good:
        problems.append(
            f"{outcome} run must pass every stage and task >= {SUCCESS_TASK_MIN}: weak stages {weak}, task {score.task:.3f}"
        )
    if outcome == "recovery":
        failed = failed_pilot_turns(turns)
        if not failed:
            problems.append("recovery run has no failed pilot check in S3")
        elif not any(_name(t) == "check_outputs" and t.t > failed[0] and t.t not in failed for t in turns):
            problems.append("recovery run never re-checked cleanly after the failed pilot")
    if outcome == "failure" and good:
        problems.append("failure run passed every stage and the task: no mistake was left uncorrected")
    return problems


def mistake_stage(score: Any, stages: Sequence[str]) -> str:
    """The stage where a failure run's mistake shows: the earliest stage scored below 1, else the last stage."""
    for stage in stages:
        value = score.stages.get(stage)
        if value is not None and value < 1.0:
            return stage
    return stages[-1]


def state_starts(outcome: str, turns: Sequence[TrajectoryTurn], score: Any, stages: Sequence[str]) -> dict[str, int]:
    """Stage -> prefix length b of the states this run yields.

    success: every stage at its boundary; recovery: S3 right after the first failed pilot check (the agent
    starts facing the failing check); failure: the boundaries of every stage after the mistake's stage (the
    agent inherits the upstream mistake)."""
    bounds = stage_boundaries(turns, stages)
    if outcome == "success":
        return bounds
    if outcome == "recovery":
        failed = failed_pilot_turns(turns)
        return {"S3": failed[0] + 1} if failed and "S3" in stages else {}
    position = list(stages).index(mistake_stage(score, stages))
    return {s: b for s, b in bounds.items() if list(stages).index(s) > position}
