"""Work on one practice task (picklable, so tasks can run in worker processes): teacher run, trajectory check,
stage states by prefix replay, E2E packaging and acceptance (all but the leak term, which the parent adds).

Reads: the task's instance (rebuilt from its practice seed). Writes: state packages under `build/states/`.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.bank import checks, e2e, practice, rows
from bat.bank.replay import replay_and_pack
from bat.bank.teacher import TeacherRun, run_llm, run_scripted
from bat.schemas.bank import E2E, BankRow, PracticeTask, Trajectory
from bat.state.atomic import atomic_write_json, read_json
from bat.state.bank_layout import BankVersionLayout

if TYPE_CHECKING:
    from bat.config.root import BatConfig


MARKERS = ".tasks"
"""Build-directory folder of finished-task markers (removed before the manifest is written)."""


@dataclass
class TaskResult:
    """What one task contributed: its trajectory, RL rows, and for E2E candidates the acceptance verdict."""

    trajectory: Trajectory
    rows: list[BankRow] = field(default_factory=list)
    acceptance: e2e.Acceptance | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "trajectory": self.trajectory.model_dump(mode="json"),
            "rows": [r.model_dump(mode="json") for r in self.rows],
            "acceptance": None if self.acceptance is None else self.acceptance.as_dict(),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TaskResult:
        acceptance = None if data["acceptance"] is None else e2e.Acceptance(**data["acceptance"])
        return cls(
            Trajectory.model_validate(data["trajectory"]), [BankRow.model_validate(r) for r in data["rows"]], acceptance
        )


def marker(build: Path, index: int) -> Path:
    """Finished-task marker of task `index` inside a build directory."""
    return Path(build) / MARKERS / f"task_{index:05d}.json"


def run_and_mark(index: int, task: PracticeTask, build: Path, scratch_root: Path, config: BatConfig) -> None:
    """Run one task and write its result marker last (atomically): a marked task is never run again."""
    atomic_write_json(marker(build, index), run_task(task, build, scratch_root, config).to_json())


def read_marker(build: Path, index: int) -> TaskResult:
    """The TaskResult stored by `run_and_mark`."""
    return TaskResult.from_json(read_json(marker(build, index)))


def _teach(task: PracticeTask, instance: Any, workdir: Path, config: BatConfig) -> TeacherRun:
    if config.bank.teacher == "llm":
        from bat.bank.llm_client import ChatClient

        return run_llm(instance, ChatClient(config.bank.llm), workdir, config, e2e.rollout_limit(config))
    return run_scripted(instance, task.variant, workdir, config)


def _trajectory(task: PracticeTask, run: TeacherRun, outcome: str, problems: list[str]) -> Trajectory:
    s = run.score
    return Trajectory(
        trajectory_id=f"trj.{task.task_id}",
        task=task,
        outcome=outcome,
        teacher=run.teacher,
        brief=run.brief,  # type: ignore[arg-type]
        turns=run.turns,
        stage_scores=dict(s.stages),
        task_score=s.task,
        overall=s.overall,
        checked=not problems,
        check_failures=problems,
    )


def _meta(state_id: str, stage: str, outcome: str, task: PracticeTask) -> dict[str, Any]:
    meta = {
        "state_id": state_id,
        "stage": stage,
        "outcome": outcome,
        "track": task.track,
        "task_id": task.task_id,
        "generator": f"{rows.GENERATOR}:{rows.GENERATOR_VERSION}",
    }
    if task.reduction is not None:
        meta["reduction"] = task.reduction.model_dump(mode="json")
    return meta


def stage_task(task: PracticeTask, build: Path, scratch: Path, config: BatConfig) -> TaskResult:
    """Teacher run -> checked trajectory -> stage states by prefix replay (Eq. 11) -> RL rows."""
    from bat.benchmark import outcome_of

    order = [s.key for s in config.stages]
    instance = practice.instance_for(task, config)
    run = _teach(task, instance, scratch / "teacher", config)
    wanted = {v: k for k, v in practice.VARIANT_FOR.items()}.get(task.variant, "success")
    outcome = outcome_of(run.score) if config.bank.teacher == "llm" else wanted
    problems = checks.check_run(outcome, run.score, run.turns, order)
    result = TaskResult(_trajectory(task, run, outcome, problems))
    if problems:
        return result
    starts = checks.state_starts(outcome, run.turns, run.score, order)
    ids = {stage: f"{task.task_id}.{stage}" for stage in starts}
    dests = {s: BankVersionLayout(build).state(ids[s]) for s in starts}
    meta = {s: _meta(ids[s], s, outcome, task) for s in starts}
    manifests = replay_and_pack(instance, run.turns, starts, scratch / "replay", config, dests, meta)
    for stage in sorted(starts, key=order.index):
        result.rows.append(
            rows.build_row(
                state_id=ids[stage],
                stage=stage,
                outcome=outcome,
                task=task,
                brief=run.brief,
                manifest=manifests[stage],
                prefix=run.turns[: starts[stage]],
                trajectory_id=result.trajectory.trajectory_id,
                teacher=run.teacher,
                seeds={"task": task.seed},
                config=config,
            )
        )
    return result


def e2e_task(task: PracticeTask, build: Path, scratch: Path, config: BatConfig) -> TaskResult:
    """Reduced task (Eq. 12) -> teacher trajectory (Eq. 13) -> package of the fresh workspace Phi(empty) ->
    acceptance of Eq. 15 without the leak term. A rejected candidate's package is removed."""
    assert task.reduction is not None, "e2e_task needs a reduced task"
    instance = practice.instance_for(task, config)
    run = _teach(task, instance, scratch / "teacher", config)
    state_id = f"{task.task_id}.{E2E}"
    dest = BankVersionLayout(build).state(state_id)
    manifest = replay_and_pack(
        instance,
        run.turns,
        {E2E: 0},
        scratch / "replay",
        config,
        {E2E: dest},
        {E2E: _meta(state_id, E2E, "success", task)},
    )[E2E]
    trajectory_id = f"trj.{task.task_id}"
    row = rows.build_row(
        state_id=state_id,
        stage=E2E,
        outcome="success",
        task=task,
        brief=run.brief,
        manifest=manifest,
        prefix=[],
        trajectory_id=trajectory_id,
        teacher=run.teacher,
        seeds={"task": task.seed},
        config=config,
    )
    verdict = e2e.accept(
        state_dir=dest,
        turns=run.turns,
        score=run.score,
        reduction=task.reduction,
        workdir=scratch / "boot",
        config=config,
    )
    result = TaskResult(_trajectory(task, run, "success", verdict.reasons), acceptance=verdict)
    if verdict.accepted:
        result.rows.append(row)
    else:
        shutil.rmtree(dest, ignore_errors=True)
    return result


def run_task(task: PracticeTask, build: Path, scratch_root: Path, config: BatConfig) -> TaskResult:
    """One task in its own scratch directory (removed afterwards); E2E candidates are the reduced tasks."""
    Path(scratch_root).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bank-", dir=scratch_root) as tmp:
        if task.reduction is None:
            return stage_task(task, build, Path(tmp), config)
        return e2e_task(task, build, Path(tmp), config)
