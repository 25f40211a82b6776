"""Trajectory checks and stage boundaries: is a teacher run a valid example of its outcome label, and where
do its stage states start (success: each stage boundary; recovery: right after a failed pilot (built-in) or right
after the turn the teacher turned back from (a plug-in benchmark); failure: the stage boundaries after a realistic
upstream mistake). Stage names come from the caller (the benchmark's stages); the built-in pilot stage and tools
from `bat.benchmark.bank_side`.

Reads only a trajectory's turns (tool names, stage tags, normalised records) and the run's grade.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from bat.benchmark.bank_side import CHECK_TOOL, PILOT_STAGE, PILOT_TOOL
from bat.schemas.bank import TrajectoryTurn

SUCCESS_TASK_MIN = 0.8
"""A success/recovery run must reach at least this task score (0-1); failure runs must stay below it or lose a stage."""


def _name(turn: TrajectoryTurn) -> str | None:
    return turn.call.get("name") if isinstance(turn.call, dict) else None


def failed_pilot_turns(turns: Sequence[TrajectoryTurn]) -> list[int]:
    """Indices of the built-in pilot stage's `check_outputs` turns whose check was not clean (the failed pilot was
    revealed there)."""
    out = []
    for turn in turns:
        if _name(turn) == CHECK_TOOL and turn.stage == PILOT_STAGE:
            result = turn.record.get("result") or {}
            meta = result.get("meta", {}) if isinstance(result, dict) else {}
            if turn.record.get("ok") is False or meta.get("clean") is False:
                out.append(turn.t)
    return out


def flawed_pilot_turns(turns: Sequence[TrajectoryTurn]) -> list[int]:
    """The pilot stage's `run_model` turns before the first failed pilot check: the mistaken pilot of a recovery run
    (kept as context for later SFT rows, never trained as a target)."""
    failed = failed_pilot_turns(turns)
    if not failed:
        return []
    return [t.t for t in turns if t.t < failed[0] and t.stage == PILOT_STAGE and _name(t) == PILOT_TOOL]


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
            problems.append("recovery run has no failed pilot check in the pilot stage")
        elif not any(_name(t) == CHECK_TOOL and t.t > failed[0] and t.t not in failed for t in turns):
            problems.append("recovery run never re-checked cleanly after the failed pilot")
    if outcome == "failure" and good:
        problems.append("failure run passed every stage and the task: no mistake was left uncorrected")
    return problems


def turn_backs(turns: Sequence[TrajectoryTurn], stages: Sequence[str]) -> list[int]:
    """Indices t whose next turn is tagged with an earlier stage than turn t (the teacher turned back after t,
    e.g. re-inspecting after a validation showed a wrong draft)."""
    rank = {s: i for i, s in enumerate(stages)}
    return [a.t for a, b in pairwise(turns) if a.stage in rank and b.stage in rank and rank[b.stage] < rank[a.stage]]


def premature_turns(turns: Sequence[TrajectoryTurn], stages: Sequence[str]) -> list[int]:
    """A recovery run's mistaken work: the turns up to its first turn back that belong to a later stage than the one
    it turned back to (kept as context for later SFT rows, never trained as a target)."""
    back = turn_backs(turns, stages)
    if not back or back[0] + 1 >= len(turns):
        return []
    rank = {s: i for i, s in enumerate(stages)}
    to = rank[turns[back[0] + 1].stage]
    return [t.t for t in turns[: back[0] + 1] if t.stage in rank and rank[t.stage] > to]


def check_plugin_run(outcome: str, score: Any, turns: Sequence[TrajectoryTurn], stages: Sequence[str]) -> list[str]:
    """`check_run` for a plug-in benchmark's scripted teacher (an interface `Score`): every label needs a valid,
    breach-free grade; success needs every stage at 1 and task >= SUCCESS_TASK_MIN; recovery needs the task at
    the bar and a turn back to an earlier stage; failure needs a stage below 1 or the task below the bar."""
    if score.breach:
        return [f"breach: {list(score.null_reasons)}"]
    if not score.valid or score.task is None:
        return [f"null cells: {list(score.null_reasons)}"]
    weak = sorted(s for s in stages if s in score.stages and (score.stages[s] or 0.0) < 1.0)
    good = not weak and score.task >= SUCCESS_TASK_MIN
    if outcome == "success" and not good:
        return [
            f"success run must pass every stage and task >= {SUCCESS_TASK_MIN}: weak stages {weak}, task {score.task}"
        ]
    if outcome == "recovery" and score.task < SUCCESS_TASK_MIN:
        return [f"recovery run must reach task >= {SUCCESS_TASK_MIN}, got {score.task}"]
    if outcome == "recovery" and not turn_backs(turns, stages):
        return ["recovery run never turned back to an earlier stage"]
    if outcome == "failure" and good:
        return ["failure run passed every stage and the task: no mistake was left uncorrected"]
    return []


def mistake_stage(score: Any, stages: Sequence[str]) -> str:
    """The stage where a failure run's mistake shows: the earliest stage scored below 1, else the last stage."""
    for stage in stages:
        value = score.stages.get(stage)
        if value is not None and value < 1.0:
            return stage
    return stages[-1]


def state_starts(
    outcome: str, turns: Sequence[TrajectoryTurn], score: Any, stages: Sequence[str], *, plugin: bool = False
) -> dict[str, int]:
    """Stage -> prefix length b of the states this run yields.

    success: every stage at its boundary; recovery: the built-in pilot stage right after the first failed pilot
    check (the agent starts facing the failing check), or for a plug-in benchmark (`plugin`) the stage of the first
    turn the teacher turned back from, right after it; failure: the boundaries of every stage after the mistake's
    stage (the agent inherits the upstream mistake)."""
    bounds = stage_boundaries(turns, stages)
    if outcome == "success":
        return bounds
    if outcome == "recovery":
        back = turn_backs(turns, stages) if plugin else failed_pilot_turns(turns)
        return {turns[back[0]].stage: back[0] + 1} if back and turns[back[0]].stage in stages else {}
    position = list(stages).index(mistake_stage(score, stages))
    return {s: b for s, b in bounds.items() if list(stages).index(s) > position}
