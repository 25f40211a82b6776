"""SFT rows (Eq. 9) from any benchmark's scripted teacher through `bat.staged.interface`.

`teacher_trajectory(bench, task, agent, workdir)` plays a scripted agent on a practice task into a `Trajectory`
(turns carry the rendered call with the agent's thought, the observation, the stage and the call's record);
`plugin_sft_rows(bench, config, ...)` slices the expert trajectories of `count` practice tasks per track into SFT rows
with the agent's opening (every stage's skill, as evaluation shows them) and splits them by trajectory into train and
validation, ready for `bat train sft`. Practice tasks only: nothing here asks for the held-out secret.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.bank.sft import ApproxLengthMeter, SliceStats, slice_trajectory, split_by_trajectory
from bat.schemas.bank import PracticeTask, SftRow, Trajectory, TrajectoryTurn
from bat.staged.interface import PRACTICE, Benchmark, Task

if TYPE_CHECKING:
    from bat.config.root import BatConfig


def play_teacher(bench: Benchmark, task: Task, agent: str, workdir: Path) -> tuple[str, list[TrajectoryTurn], Any]:
    """Play the benchmark's scripted `agent` on `task` in a fresh environment under `workdir` (removed afterwards);
    returns (brief, turns, score). Turns carry the rendered call with the agent's thought, the observation, the
    stage and the call's record, with the host path of `workdir` aliased (`plugin_states.alias`)."""
    import shutil

    from bat.bank.plugin_states import alias
    from bat.policy.codec import render_tool_call

    turns: list[TrajectoryTurn] = []
    with bench.open(task, workdir) as env:
        brief = env.reset()
        act, observation = bench.agent(task, agent), brief
        while (action := act(observation)) is not None:
            call = {k: v for k, v in action.items() if k != "thought"}
            step = env.step(action)
            turns.append(
                TrajectoryTurn(
                    t=len(turns),
                    stage=step.stage,
                    response=render_tool_call(call, thought=str(action.get("thought") or "")),
                    call=call,
                    observation=alias(step.observation, workdir),
                    record=alias(dict(step.info), workdir),
                    done=step.done,
                )
            )
            observation = step.observation
            if step.done:
                break
        score = env.score()
    shutil.rmtree(workdir, ignore_errors=True)
    return alias(brief, workdir), turns, score


def full_marks(score: Any) -> bool:
    """Every applicable stage and the task at 1 (Overall 1)."""
    return score.overall == 1.0 and all(v == 1.0 for v in score.stages.values())


def teacher_trajectory(bench: Benchmark, task: Task, agent: str, workdir: Path) -> Trajectory:
    """Play the benchmark's scripted `agent` on practice `task` under `workdir` and grade it; `outcome` is success
    when every stage and the task score full marks, else failure."""
    if task.split != PRACTICE:
        raise ValueError(f"teacher trajectories come from practice tasks; {task.task_id} is on {task.split!r}")
    brief, turns, score = play_teacher(bench, task, agent, workdir)
    full = full_marks(score)
    return Trajectory(
        trajectory_id=f"trj.{task.task_id}.{agent}",
        task=PracticeTask(task_id=task.task_id, track=task.track, seed=task.seed, variant=agent),
        outcome="success" if full else "failure",
        teacher=f"scripted:{agent}",
        brief=brief,
        turns=turns,
        stage_scores=dict(score.stages),
        task_score=score.task,
        overall=score.overall,
        checked=full,
        check_failures=[] if full else [f"{agent} scored {score.summary()}"],
    )


def plugin_sft_rows(
    bench: Benchmark, config: BatConfig, *, seed: int, count: int, meter: Any = None
) -> tuple[dict[str, list[SftRow]], SliceStats]:
    """Train and validation SFT rows from the expert on `count` practice tasks per track (from `seed`); rows longer
    than `bank.sft_max_length` are counted in the stats, never clipped. `meter` measures lengths (default: approximate
    tokens)."""
    stages = bench.stages()
    skills, names, order = {s.key: s.skill for s in stages}, {s.key: s.name for s in stages}, [s.key for s in stages]
    with tempfile.TemporaryDirectory(prefix="bat-teacher-") as tmp:
        trajectories = [
            teacher_trajectory(bench, task, "expert", Path(tmp) / task.task_id)
            for task in bench.tasks(PRACTICE, seed=seed, count=count)
        ]
    failed = [t.trajectory_id for t in trajectories if not t.checked]
    if failed:
        raise ValueError(f"{bench.name}: the expert did not earn full marks on {failed[:5]}; run `bat benchmark check`")
    splits = split_by_trajectory([t.trajectory_id for t in trajectories], config.bank.validation_fraction, seed)
    stats, out = SliceStats(), {"train": [], "validation": []}
    for traj in trajectories:
        split = splits[traj.trajectory_id]
        out[split] += slice_trajectory(
            traj,
            skills=skills,
            stage_order=order,
            meter=meter or ApproxLengthMeter(),
            max_length=config.bank.sft_max_length,
            split=split,
            stats=stats,
            stage_names=names,
            agent_context=True,
            preamble=bench.preamble,
        )
    return out, stats
