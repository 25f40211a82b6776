"""Fictional practice tasks: which practice seeds the bank runs, and rebuilding an instance (or its grader) from a task.

Only the benchmark's practice space is used (`space="practice"`); held-out instances are never generated here.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.schemas.bank import PracticeTask, Reduction, TaskParams

if TYPE_CHECKING:
    from bat.config.root import BatConfig

VARIANT_FOR: dict[str, str] = {"success": "expert", "recovery": "recovery", "failure": "failure"}
"""Outcome label -> scripted teacher variant of the benchmark."""
MAX_SEED_PROBES = 64
"""Practice indices tried per task slot to find an instance where the variant's outcome can happen."""


def instance_for(task: PracticeTask, config: BatConfig) -> Any:
    """The benchmark instance of `task` (R_lambda of Eq. 12 applied: only `reduction.cases` cases are generated, each
    input capped at `reduction.input_fraction` of its size; a written task's `params` set its modality, distractor
    cards, pitfalls and case count). An input fraction the track cannot make raises, naming the valid range."""
    return build_instance(task.track, task.seed, config, task.reduction, task.params, task_id=task.task_id)


def build_instance(
    track: str,
    seed: int,
    config: BatConfig,
    reduction: Reduction | None,
    params: TaskParams | None,
    *,
    task_id: str = "",
) -> Any:
    """The practice instance of (track, seed) under `reduction` (cases and lambda_input, Eq. 12) and written
    `params`; reads nothing else. A refused input fraction raises ValueError naming the task and the valid range."""
    from bat.benchmark import practice_instance
    from bat.benchmark.tracks import get_track

    fraction = reduction.input_fraction if reduction else 1.0
    problem = get_track(track).fraction_problem(fraction)
    if problem:
        raise ValueError(f"task {task_id or f'{track}:{seed}'}: {problem}")
    n_cases = reduction.cases if reduction else (params.cases if params else None)
    return practice_instance(
        track, seed, config, n_cases=n_cases, params=instance_params(params), input_fraction=fraction
    )


def instance_params(params: TaskParams | None) -> Any:
    """The benchmark's `InstanceParams` of a written task's `params` (None for a scripted task)."""
    from bat.benchmark import InstanceParams

    if params is None:
        return None
    return InstanceParams(params.modality, tuple(params.pitfalls), tuple(params.distractors))


def write_grader(task: PracticeTask, config: BatConfig, workdir: Path) -> Path:
    """Rebuild the task's hidden grader side under `workdir/grader` (outside any workspace); returns it.

    The instance is materialised into `workdir/_instance_ws` only to produce the grader files."""
    from bat.benchmark import materialize

    grader = Path(workdir) / "grader"
    materialize(instance_for(task, config), Path(workdir) / "_instance_ws", grader)
    return grader


def suits(instance: Any, outcome: str) -> bool:
    """Whether `instance` can yield `outcome`: recovery and failure need a pitfall that a pilot reveals
    (the recovery teacher fixes it, the failure teacher leaves it); success takes any instance."""
    if outcome in ("recovery", "failure"):
        return bool(instance.pilot_revealed)
    return True


def suits_pitfalls(pitfalls: list[str] | tuple[str, ...], outcome: str) -> bool:
    """`suits` for a written task's pitfall names: recovery and failure need one a pilot reveals."""
    from bat.benchmark import PILOT_REVEALED

    return outcome not in ("recovery", "failure") or any(p in PILOT_REVEALED for p in pitfalls)


def task_slots(config: BatConfig, tracks: list[str]) -> list[tuple[str, str, int]]:
    """(track, outcome, slot) of every stage-task slot, in plan order (`bank.track_tasks` over `tasks_per_track`)."""
    return [
        (track, outcome, slot)
        for track in tracks
        for outcome in config.bank.outcomes
        for slot in range(config.bank.track_tasks.get(track, config.bank.tasks_per_track))
    ]


def plan_tasks(config: BatConfig, bank_seed: int, tracks: list[str]) -> list[PracticeTask]:
    """Practice tasks for every track x outcome x slot (attempt 0), deterministic in `bank_seed`."""
    return [find_task(config, bank_seed, *slot, attempt=0) for slot in task_slots(config, tracks)]


def find_task(
    config: BatConfig,
    bank_seed: int,
    track: str,
    outcome: str,
    slot: int,
    attempt: int,
    taken: set[str] = frozenset(),
) -> PracticeTask:
    """The task of (track, outcome, slot, attempt): probe practice indices derived from the seed until an
    instance suits the outcome and its id is not `taken` (raises after MAX_SEED_PROBES, naming the slot).
    Attempts > 0 are replacements for a slot whose earlier teacher trajectory failed its check."""
    from bat.benchmark import practice_instance, practice_seed
    from bat.seeds import derive_seed

    for probe in range(MAX_SEED_PROBES):
        parts = (track, outcome, slot, probe) if attempt == 0 else (track, outcome, slot, "retry", attempt, probe)
        seed = practice_seed(track, derive_seed(bank_seed, "task", *parts), config)
        if suits(practice_instance(track, seed, config), outcome):
            task = make_task(track, seed, VARIANT_FOR[outcome], None, config, slot=slot, attempt=attempt)
            if task.task_id not in taken:
                return task
    raise RuntimeError(
        f"no practice instance suits {outcome!r} for {track} slot {slot} attempt {attempt} in {MAX_SEED_PROBES} probes"
    )


def plan_e2e_tasks(config: BatConfig, bank_seed: int, tracks: list[str]) -> list[PracticeTask]:
    """E2E surrogate candidates: practice tasks reduced by R_lambda from the configured grid (expert teacher)."""
    from bat.benchmark import practice_seed
    from bat.benchmark.reduction import choose_reduction
    from bat.seeds import derive_seed

    tasks: list[PracticeTask] = []
    for track in tracks:
        for slot in range(config.bank.e2e_per_track):
            seed = practice_seed(track, derive_seed(bank_seed, "e2e", track, slot), config)
            lam = choose_reduction(
                config.bank.reduction_grid,
                track,
                config.benchmark.cases_per_instance,
                derive_seed(bank_seed, "lambda", track, slot),
            )
            tasks.append(make_task(track, seed, "expert", lam, config, slot=slot, attempt=0))
    return tasks


def make_task(
    track: str,
    seed: int,
    variant: str,
    reduction: Reduction | None,
    config: BatConfig,
    *,
    slot: int,
    attempt: int,
    params: TaskParams | None = None,
) -> PracticeTask:
    """The PracticeTask of (track, practice seed, variant, reduction, written params); its id names the instance."""
    instance = build_instance(track, seed, config, reduction, params)
    suffix = "e2e" if reduction else variant
    return PracticeTask(
        task_id=f"{instance.instance_id}.{suffix}",
        track=track,
        seed=seed,
        variant=variant,
        reduction=reduction,
        slot=slot,
        attempt=attempt,
        params=params,
    )


def bank_tracks(config: BatConfig) -> list[str]:
    """Tracks to synthesise (bank.tracks or every benchmark track); unknown names raise listing the valid ones."""
    valid = list(config.benchmark.tracks)
    chosen = list(config.bank.tracks or valid)
    unknown = [t for t in chosen if t not in valid]
    if unknown:
        raise ValueError(f"bank.tracks has unknown tracks {unknown}; valid (benchmark.tracks): {valid}")
    return chosen
