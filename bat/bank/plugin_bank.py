"""The Stage Bank of a plug-in benchmark (`benchmark.name` other than `builtin`), through `bat.staged.interface` only.

Practice tasks come from `bench.tasks("practice", ...)` (one draw per task slot, `plugin_states.draw`); the teacher is
the benchmark's scripted agent of each outcome (`expert`, `recovery`, `failure`; outcomes whose agent the benchmark
lacks are left out); a checked trajectory yields stage states by prefix replay (`Environment.snapshot`, Eq. 11) at
`checks.state_starts(..., plugin=True)`; E2E surrogates (Eq. 12-15) are the expert on `bench.surrogate(task, 1.0)`
from a fresh workspace, accepted when the package boots, the run fits H, every stage scores 1 and (in the parent)
the leakage scan is clean. Rows carry the benchmark's own skills, preamble and rubric criteria (no evidence ids).

Reads: config (bank, benchmark, rollout budgets), the benchmark's practice tasks. Writes: state packages under
`build/states/` (the caller writes the rest of the version, `bat.bank.synthesize`).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.bank import checks, e2e
from bat.bank.collected import Collected
from bat.bank.plugin_sft import play_teacher
from bat.bank.plugin_states import draw, pack_state, replay_states, task_of
from bat.bank.practice import VARIANT_FOR
from bat.bank.rows import assemble_row, handoff_note
from bat.bank.tasks import TaskResult, _meta
from bat.benchmark import prompts
from bat.schemas.bank import E2E, BankRow, PracticeTask, RubricItemRef, Trajectory, TrajectoryTurn
from bat.seeds import derive_seed
from bat.staged.interface import Benchmark, Task
from bat.state.bank_layout import BankVersionLayout

if TYPE_CHECKING:
    from bat.config.root import BatConfig

GENERATOR_VERSION = "plugin-1"
"""Version of this bank generator (enters the plug-in bank's fingerprint)."""
MAX_DRAWS = 16
"""Draws tried per task slot for a task id no other slot took."""


def _draw(bench: Benchmark, config: BatConfig, seed: int, track: str, parts: tuple[Any, ...], taken: set[str]) -> Any:
    for probe in range(MAX_DRAWS):
        draw_seed = derive_seed(config.benchmark.practice_seed, "bank", seed, track, *parts, probe)
        task = draw(bench, track, draw_seed)
        if task.task_id not in taken:
            return draw_seed, task
    raise RuntimeError(f"{bench.name}: no unused practice task for {track} {parts} in {MAX_DRAWS} draws")


def plan(bench: Benchmark, config: BatConfig, seed: int, tracks: list[str]) -> tuple[list[PracticeTask], int]:
    """The practice tasks of a plug-in bank in run order: every track x outcome (whose agent the benchmark has) x slot
    (`bank.track_tasks` over `tasks_per_track`), then `bank.e2e_per_track` E2E candidates per track; and how many of
    them are stage tasks (the rest are E2E). Deterministic in `seed` (the bank seed)."""
    taken: set[str] = set()
    stage_tasks, e2e_tasks = [], []
    for track in tracks:
        for outcome in config.bank.outcomes:
            variant = VARIANT_FOR[outcome]
            if variant not in bench.agents:
                continue
            for slot in range(config.bank.track_tasks.get(track, config.bank.tasks_per_track)):
                draw_seed, task = _draw(bench, config, seed, track, ("task", outcome, slot), taken)
                taken.add(task.task_id)
                stage_tasks.append(
                    PracticeTask(
                        task_id=f"{task.task_id}.{variant}", track=track, seed=draw_seed, variant=variant, slot=slot
                    )
                )
    for track in tracks:
        for slot in range(config.bank.e2e_per_track):
            draw_seed, task = _draw(bench, config, seed, track, ("e2e", slot), taken)
            taken.add(task.task_id)
            e2e_tasks.append(
                PracticeTask(task_id=f"{task.task_id}.e2e", track=track, seed=draw_seed, variant="expert", slot=slot)
            )
    return stage_tasks + e2e_tasks, len(stage_tasks)


def replacement(
    bench: Benchmark, config: BatConfig, seed: int, task: PracticeTask, attempt: int, taken: set[str]
) -> PracticeTask:
    """The `attempt`-th replacement of a stage task whose teacher trajectory failed its check (a new draw)."""
    draw_seed, new = _draw(bench, config, seed, task.track, ("retry", task.variant, task.slot, attempt), taken)
    return task.model_copy(update={"task_id": f"{new.task_id}.{task.variant}", "seed": draw_seed, "attempt": attempt})


def plugin_row(
    bench: Benchmark,
    config: BatConfig,
    *,
    state_id: str,
    stage: str,
    outcome: str,
    task: PracticeTask,
    brief: str,
    manifest: Any,
    prefix: list[TrajectoryTurn],
    trajectory_id: str,
    teacher: str,
) -> BankRow:
    """One RL row of a plug-in benchmark: kappa = the stage's skill (E2E: every stage's, in order) after the
    benchmark's preamble; c = the stage's criteria (E2E: the union over every stage, Eq. 14); no evidence ids."""
    stages = bench.stages()
    order, names, skills = [s.key for s in stages], {s.key: s.name for s in stages}, {s.key: s.skill for s in stages}
    if stage == E2E:
        skill, chosen, user = prompts.e2e_skill_text(order, skills, names), stages, prompts.user_message(brief)
    else:
        skill, chosen = prompts.skill_text(stage, skills, names), [s for s in stages if s.key == stage]
        files = [f.path for f in manifest.files]
        note = handoff_note(stage, order, prefix, files, config.benchmark.max_observation_chars)
        user = prompts.user_message(brief, note)
    return assemble_row(
        state_id=state_id,
        stage=stage,
        outcome=outcome,
        task=task,
        manifest=manifest,
        prefix_turns=len(prefix),
        trajectory_id=trajectory_id,
        teacher=teacher,
        seeds={"task": task.seed},
        prompt=[prompts.system_message(skill, bench.preamble), user],
        skill=skill,
        rubric=[RubricItemRef(id=c.id, stage=s.key, text=c.text) for s in chosen for c in s.criteria],
        evidence=[],
    )


def _trajectory(
    task: PracticeTask, brief: str, turns: list[TrajectoryTurn], score: Any, outcome: str, problems: list[str]
) -> Trajectory:
    return Trajectory(
        trajectory_id=f"trj.{task.task_id}",
        task=task,
        outcome=outcome,  # type: ignore[arg-type]
        teacher=f"scripted:{task.variant}",
        brief=brief,
        turns=turns,
        stage_scores=dict(score.stages),
        task_score=score.task,
        overall=score.overall,
        checked=not problems,
        check_failures=problems,
    )


def _stage_score_at(bench: Benchmark, task: Task, state: Any, stage: str, workdir: Path) -> float | None:
    """The score of `stage` in an environment restored at `state` before any new turn (the prefix's own grade)."""
    with bench.open(task, workdir, state=state) as env:
        env.reset()
        value = env.score().stages.get(stage)
    shutil.rmtree(workdir, ignore_errors=True)
    return value


def stage_task(bench: Benchmark, config: BatConfig, practice: PracticeTask, build: Path, scratch: Path) -> TaskResult:
    """Teacher run -> checked trajectory -> stage states by prefix replay -> RL rows. A recovery state must start
    where its stage still fails (the teacher turned back because of it), else the run is not a recovery example."""
    task, order = task_of(bench, practice), [s.key for s in bench.stages()]
    outcome = {v: k for k, v in VARIANT_FOR.items()}[practice.variant]
    brief, turns, score = play_teacher(bench, task, practice.variant, scratch / "teacher")
    problems = checks.check_plugin_run(outcome, score, turns, order)
    starts = {} if problems else checks.state_starts(outcome, turns, score, order, plugin=True)
    states = replay_states(bench, task, turns, starts, scratch / "replay") if starts else {}
    for stage in states if outcome == "recovery" else ():
        if _stage_score_at(bench, task, states[stage], stage, scratch / "probe") == 1.0:
            problems.append(f"recovery run turned back after {stage} while {stage} already passed")
    result = TaskResult(_trajectory(practice, brief, turns, score, outcome, problems))
    if problems:
        return result
    for stage in sorted(states, key=order.index):
        state_id = f"{practice.task_id}.{stage}"
        dest = BankVersionLayout(build).state(state_id)
        manifest = pack_state(
            states[stage], dest, {**_meta(state_id, stage, outcome, practice), "prefix_turns": starts[stage]}
        )
        result.rows.append(
            plugin_row(
                bench,
                config,
                state_id=state_id,
                stage=stage,
                outcome=outcome,
                task=practice,
                brief=brief,
                manifest=manifest,
                prefix=turns[: starts[stage]],
                trajectory_id=result.trajectory.trajectory_id,
                teacher=result.trajectory.teacher,
            )
        )
    return result


def accept(
    bench: Benchmark, task: Task, state: Any, turns: list[TrajectoryTurn], score: Any, workdir: Path, config: BatConfig
) -> e2e.Acceptance:
    """Eq. 15 for a plug-in E2E candidate except the leak term: the package boots (the environment restored at it
    resets to a non-empty brief), the run fits H, every stage scores 1 and no breach (no lambda_validate: a plug-in
    benchmark names no validation passes)."""
    result = e2e.Acceptance(validate_ok=True)
    try:
        with bench.open(task, workdir, state=state) as env:
            result.boot = bool(env.reset().strip())
        why = "" if result.boot else "the booted workspace has an empty brief"
    except Exception as exc:
        why = f"{type(exc).__name__}: {exc}"
    shutil.rmtree(workdir, ignore_errors=True)
    if not result.boot:
        result.reasons.append(f"boot: {why}")
    h = e2e.rollout_limit(config)
    result.fits_h = len(turns) <= h
    if not result.fits_h:
        result.reasons.append(f"limit_h: trajectory has {len(turns)} turns > H={h}")
    for stage in (s.key for s in bench.stages()):
        value = score.stages.get(stage)
        result.stage_checks[stage] = stage not in score.stages or value == 1.0
        if not result.stage_checks[stage]:
            result.reasons.append(f"stage_check: {stage} scored {value}")
    if score.breach:
        result.reasons.append(f"breach: {list(score.null_reasons)}")
    return result


def e2e_task(bench: Benchmark, config: BatConfig, practice: PracticeTask, build: Path, scratch: Path) -> TaskResult:
    """Surrogate task -> expert trajectory -> package of the fresh workspace -> acceptance without the leak term.
    A rejected candidate's package is removed."""
    task = bench.surrogate(task_of(bench, practice), 1.0)
    brief, turns, score = play_teacher(bench, task, "expert", scratch / "teacher")
    state = replay_states(bench, task, turns, {E2E: 0}, scratch / "replay")[E2E]
    state_id = f"{practice.task_id}.{E2E}"
    dest = BankVersionLayout(build).state(state_id)
    manifest = pack_state(state, dest, {**_meta(state_id, E2E, "success", practice), "prefix_turns": 0})
    verdict = accept(bench, task, state, turns, score, scratch / "boot", config)
    result = TaskResult(_trajectory(practice, brief, turns, score, "success", verdict.reasons), acceptance=verdict)
    if verdict.accepted:
        row = plugin_row(
            bench,
            config,
            state_id=state_id,
            stage=E2E,
            outcome="success",
            task=practice,
            brief=brief,
            manifest=manifest,
            prefix=[],
            trajectory_id=result.trajectory.trajectory_id,
            teacher=result.trajectory.teacher,
        )
        result.rows.append(row)
    else:
        shutil.rmtree(dest, ignore_errors=True)
    return result


def collect(
    bench: Benchmark, config: BatConfig, seed: int, tracks: list[str], build: Path, scratch: Path, scanner: Any
) -> Collected:
    """Run every planned task (stage tasks get up to `bank.retries` replacement draws when their trajectory fails
    its check) and merge the results in task order into a `synthesize.Collected`; `scanner` adds the leak term."""
    tasks, n_stage = plan(bench, config, seed, tracks)
    out = Collected(tasks=list(tasks))
    shutil.rmtree(Path(build) / "states", ignore_errors=True)  # leftovers of a killed build are rebuilt
    shutil.rmtree(scratch, ignore_errors=True)
    taken = {t.task_id for t in tasks}
    for index, practice in enumerate(tasks):
        work = Path(scratch) / f"task_{index:05d}"
        if index >= n_stage:
            out.add(e2e_task(bench, config, practice, build, work), build, scanner)
            continue
        result = stage_task(bench, config, practice, build, work)
        for attempt in range(1, config.bank.retries + 1):
            if result.trajectory.checked:
                break
            out.add(result, build, scanner)
            practice = replacement(bench, config, seed, practice, attempt, taken)
            taken.add(practice.task_id)
            out.tasks.append(practice)
            result = stage_task(bench, config, practice, build, work / f"retry_{attempt}")
        out.add(result, build, scanner)
    shutil.rmtree(scratch, ignore_errors=True)
    return out
