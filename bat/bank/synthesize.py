"""The data factory: practice tasks -> teacher trajectories -> stage states + E2E surrogates + SFT slices -> bank vNNNN.

Reads: config (bank, benchmark, sandbox, stages, leakage), the benchmark's practice seed space; a refresh k >= 1 also
the newest controller aggregate before round k (steering, the LLM skill writer: aggregate numbers only).
Writes: one new immutable `RunLayout.bank(v)` (see `bat.bank` for the files). Same config + seed -> same
fingerprint -> the existing version is reused (no-op); content is byte-identical for a given seed and any
number of workers. A killed synthesis resumes: finished tasks keep markers in `bank/.build-<fingerprint>/`.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import shutil
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.bank import checks, e2e, practice, rows, sft, skill_writer, store, task_writer
from bat.bank import tasks as tasks_mod
from bat.bank.aggregates import newest_controller_aggregate
from bat.bank.pools import build_index
from bat.bank.practice import bank_tracks
from bat.bank.skills import write_skills_file
from bat.bank.tasks import TaskResult
from bat.schemas.bank import E2E, BankRow, PracticeTask, SftRow, Trajectory
from bat.seeds import derive_seed
from bat.state.atomic import atomic_write_json
from bat.state.bank_layout import SFT_SPLIT_FILES, BankVersionLayout
from bat.state.jsonl import write_jsonl
from bat.state.layout import RunLayout

if TYPE_CHECKING:
    from bat.config.root import BatConfig


CONTENT_NEUTRAL = {"workers", "refresh_steering", "skill_writer", "skill_llm"}
"""Bank knobs that change how fast a bank is built, never its content (left out of the fingerprint; the steering
mode acts only through the `track_tasks` it sets, the skill writer only through the `skills` it sets)."""
WRITER_KNOBS = {"task_writer", "task_writer_llm"}
"""Bank knobs of the LLM task writer: fingerprinted only when `bank.task_writer == "llm"` (a scripted bank's
fingerprint does not depend on them)."""


def bank_seed(config: BatConfig) -> int:
    """`bank.seed`, or the run seed when unset."""
    return config.run.seed if config.bank.seed is None else config.bank.seed


def steered_track_tasks(config: BatConfig, track_overall: dict[str, float | None]) -> dict[str, int]:
    """Tasks per track for a steered refresh: `tasks_per_track x tracks` tasks split in proportion to each track's
    weakness 1 - Overall (scores in [0, 1]; a track without a score counts as 0, the weakest), at least one each,
    rounded by largest remainder so the total is kept. Reads aggregate numbers only."""
    tracks = bank_tracks(config)
    total = config.bank.tasks_per_track * len(tracks)
    weakness = {t: max(1.0 - (track_overall.get(t) or 0.0), 0.0) + 1e-9 for t in tracks}
    spare = total - len(tracks)
    shares = {t: spare * w / sum(weakness.values()) for t, w in weakness.items()}
    counts = {t: 1 + int(shares[t]) for t in tracks}
    for t in sorted(tracks, key=lambda t: (int(shares[t]) - shares[t], tracks.index(t)))[
        : total - sum(counts.values())
    ]:
        counts[t] += 1
    return counts


def steering(config: BatConfig, layout: RunLayout, refresh: int) -> tuple[BatConfig, dict[str, Any] | None]:
    """The config a steered refresh synthesizes with, and the record of why (None when not steered; paper §2.1:
    "Aggregate recording statistics can guide synthesis"): refresh k >= 1 with `bank.refresh_steering: weakness`
    reads the newest controller aggregate of a round before k (training-side aggregate numbers, never held-out
    content) and sets `bank.track_tasks` (`steered_track_tasks`)."""
    if refresh < 1 or config.bank.refresh_steering == "off":
        return config, None
    found = newest_controller_aggregate(layout, refresh)
    if found is None:
        return config, None
    source, agg = found
    scores = {t: agg.tracks[t].overall if t in agg.tracks else None for t in bank_tracks(config)}
    tasks = steered_track_tasks(config, scores)
    record = {"mode": "weakness", "source_round": source, "track_overall": scores, "track_tasks": tasks}
    return config.model_copy(update={"bank": config.bank.model_copy(update={"track_tasks": tasks})}), record


def refreshed_config(config: BatConfig, refresh: int) -> BatConfig:
    """The config a bank synthesis runs with. Refresh 0 (the bootstrap bank) is `config` itself; refresh k >= 1 (the
    asynchronous refresh beside round k, paper §2.1: the Stage Bank is refreshed while training runs) sets
    `bank.seed` to `derive_seed(bank_seed(config), "refresh", k)`, so every refresh draws new practice tasks and E2E
    reductions from the practice seed space and becomes a new version (its fingerprint differs)."""
    if refresh < 0:
        raise ValueError(f"refresh index must be >= 0, got {refresh}")
    if refresh == 0:
        return config
    seed = derive_seed(bank_seed(config), "refresh", refresh)
    return config.model_copy(update={"bank": config.bank.model_copy(update={"seed": seed})})


def fingerprint(config: BatConfig) -> str:
    """Digest of everything that determines a bank's content: generator version, seed, and the bank, benchmark,
    sandbox (records name the runtime), leakage (E2E leak term) and stage config; with `bank.task_writer: llm` also
    the writer's settings and version. `bank.track_tasks` and `bank.skills` enter only when set, and the benchmark
    contract only when it differs from the built-in one (rows carry its item texts), so a config without them keeps
    the fingerprint it had before they existed."""
    unset = {name for name in ("track_tasks", "skills") if not getattr(config.bank, name)}
    exclude = CONTENT_NEUTRAL | unset
    exclude |= set() if config.bank.task_writer == "llm" else WRITER_KNOBS
    payload = {
        "generators": _generator_versions(config),
        "seed": bank_seed(config),
        "bank": config.bank.model_dump(mode="json", exclude=exclude),
        "benchmark": config.benchmark.model_dump(
            mode="json", exclude={"contract"} if config.benchmark.contract.is_builtin() else set()
        ),
        "sandbox": config.sandbox.model_dump(mode="json"),
        "leakage": config.leakage.model_dump(mode="json"),
        "stages": [s.model_dump(mode="json") for s in config.stages],
        "rollout_limit_h": e2e.rollout_limit(config),
    }
    if config.bank.task_writer == "llm":
        payload["task_writer"] = task_writer.WRITER_VERSION
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()


@dataclass
class Collected:
    """Everything one synthesis pass produces before it is written."""

    tasks: list[PracticeTask] = field(default_factory=list)
    trajectories: list[Trajectory] = field(default_factory=list)
    e2e_trajectory_ids: set[str] = field(default_factory=set)
    rows: list[BankRow] = field(default_factory=list)
    unchecked: Counter = field(default_factory=Counter)
    e2e: dict[str, Any] = field(
        default_factory=lambda: {"candidates": 0, "accepted": 0, "rejected_by_reason": Counter(), "decisions": {}}
    )
    writer: dict[str, Any] | None = None
    """The LLM task writer's counts (`TaskWriter.counts`); None for scripted tasks."""

    def add(self, result: TaskResult, build: Path, scanner: Any | None) -> None:
        """Merge one task's result (in task order); E2E candidates get the leak term of Eq. 15 here."""
        traj = result.trajectory
        verdict = result.acceptance
        if verdict is not None:
            self.e2e["candidates"] += 1
            if verdict.accepted and scanner is not None:
                e2e.check_leak(verdict, result.rows[0], scanner)
                if not verdict.accepted:
                    shutil.rmtree(build / result.rows[0].state.path, ignore_errors=True)
                    result.rows = []
                    traj = traj.model_copy(update={"checked": False, "check_failures": list(verdict.reasons)})
            self.e2e["decisions"][f"{traj.task.task_id}.{E2E}"] = verdict.as_dict()
            if verdict.accepted:
                self.e2e["accepted"] += 1
                self.e2e_trajectory_ids.add(traj.trajectory_id)
            for reason in verdict.reasons:
                self.e2e["rejected_by_reason"][reason.split(":")[0]] += 1
        elif not traj.checked:
            self.unchecked[traj.outcome] += 1
        self.trajectories.append(traj)
        self.rows.extend(result.rows)


def _scanner(config: BatConfig, layout: RunLayout) -> Any | None:
    if not config.leakage.enabled:
        return None
    from bat.leakage.preflight import ensure_index
    from bat.leakage.scanner import Scanner

    return Scanner(ensure_index(layout, config))


def _run_missing(config: BatConfig, tasks: list[PracticeTask], build: Path, scratch: Path) -> None:
    """Run every task without a finished marker in `build/.tasks/` (in `bank.workers` processes)."""
    todo = [(i, t) for i, t in enumerate(tasks) if not tasks_mod.marker(build, i).is_file()]
    if config.bank.workers == 1 or len(todo) <= 1:
        for i, task in todo:
            tasks_mod.run_and_mark(i, task, build, scratch, config)
        return
    n = len(todo)
    with ProcessPoolExecutor(max_workers=config.bank.workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        list(
            pool.map(
                tasks_mod.run_and_mark,
                [i for i, _ in todo],
                [t for _, t in todo],
                [build] * n,
                [scratch] * n,
                [config] * n,
            )
        )


def collect(config: BatConfig, layout: RunLayout, build: Path, scratch: Path) -> Collected:
    """Run every planned task, resuming from finished-task markers in `build/.tasks/`; a slot whose teacher
    trajectory fails its check gets up to `bank.retries` replacement tasks; merge in task order.

    State packages are written under `build/states/`; the markers are removed once everything is merged.
    `scratch` (task workspaces) is wiped first — leftovers of a killed run — and removed at the end."""
    seed, tracks = bank_seed(config), bank_tracks(config)
    writer = None
    if config.bank.task_writer == "llm":
        writer = task_writer.TaskWriter(config, seed, build / task_writer.WRITTEN)
        out = Collected(tasks=writer.plan(tracks))
    else:
        out = Collected(tasks=practice.plan_tasks(config, seed, tracks) + practice.plan_e2e_tasks(config, seed, tracks))
    shutil.rmtree(scratch, ignore_errors=True)
    _run_missing(config, out.tasks, build, scratch)
    for attempt in range(1, config.bank.retries + 1 if config.bank.teacher == "scripted" else 1):
        failed = [
            t
            for i, t in enumerate(out.tasks)
            if t.reduction is None
            and t.attempt == attempt - 1
            and not tasks_mod.read_marker(build, i).trajectory.checked
        ]
        if not failed:
            break
        taken = {t.task_id for t in out.tasks}
        for task in failed:
            outcome = {v: k for k, v in practice.VARIANT_FOR.items()}[task.variant]
            if writer is None:
                new = practice.find_task(config, seed, task.track, outcome, task.slot, attempt, taken)
            else:
                new = writer.replacement(task, outcome, attempt, taken)
            if new is not None:
                out.tasks.append(new)
                taken.add(new.task_id)
        _run_missing(config, out.tasks, build, scratch)
    scanner = _scanner(config, layout)
    for i in range(len(out.tasks)):
        out.add(tasks_mod.read_marker(build, i), build, scanner)
    shutil.rmtree(build / tasks_mod.MARKERS)
    if writer is not None:
        out.writer = writer.counts()
        (build / task_writer.WRITTEN).unlink()
    shutil.rmtree(scratch, ignore_errors=True)
    return out


def slice_sft(config: BatConfig, out: Collected) -> tuple[list[SftRow], sft.SliceStats]:
    """SFT rows of every checked trajectory whose label is in `bank.sft_outcomes` (plus accepted E2E ones)."""
    from bat.bank.skills import stage_skills

    order = [s.key for s in config.stages]
    names = {s.key: s.name for s in config.stages}
    skills = stage_skills(config)
    meter = _meter(config)
    use = [
        t
        for t in out.trajectories
        if t.checked
        and (
            t.trajectory_id in out.e2e_trajectory_ids
            or (t.task.reduction is None and t.outcome in config.bank.sft_outcomes)
        )
    ]
    splits = sft.split_by_trajectory(
        [t.trajectory_id for t in use], config.bank.validation_fraction, derive_seed(bank_seed(config), "sft_split")
    )
    stats = sft.SliceStats()
    sliced: list[SftRow] = []
    for traj in use:
        sliced += sft.slice_trajectory(
            traj,
            skills=skills,
            stage_order=order,
            meter=meter,
            max_length=config.bank.sft_max_length,
            split=splits[traj.trajectory_id],
            stats=stats,
            stage_names=names,
            e2e=traj.trajectory_id in out.e2e_trajectory_ids,
            skip=checks.flawed_pilot_turns(traj.turns) if traj.outcome == "recovery" else (),
            agent_context=config.bank.sft_context == "agent",
        )
    return sliced, stats


def _meter(config: BatConfig) -> sft.LengthMeter:
    if config.bank.sft_tokenizer is None:
        return sft.ApproxLengthMeter(config.bank.approx_chars_per_token)
    from bat.benchmark import TOOL_SPECS
    from bat.policy.loader import load_tokenizer

    return sft.TokenLengthMeter(load_tokenizer(config.bank.sft_tokenizer), TOOL_SPECS)


def _counts(config: BatConfig, out: Collected, sft_rows: list[SftRow], stats: sft.SliceStats) -> dict[str, Any]:
    rl: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
    for row in out.rows:
        rl[row.stage][row.track][row.outcome] += 1
    by_stage = Counter(r.stage for r in sft_rows)
    return {
        "rl": {s: {t: dict(sorted(c.items())) for t, c in sorted(v.items())} for s, v in sorted(rl.items())},
        "rl_total": len(out.rows),
        "tasks": len(out.tasks),
        "trajectories": len(out.trajectories),
        "trajectories_unchecked": dict(sorted(out.unchecked.items())),
        "sft": {
            "train": sum(r.split == "train" for r in sft_rows),
            "validation": sum(r.split == "validation" for r in sft_rows),
            "by_stage": dict(sorted(by_stage.items())),
            "rejected": stats.as_dict(),
        },
        "e2e": {
            "candidates": out.e2e["candidates"],
            "accepted": out.e2e["accepted"],
            "rejected_by_reason": dict(sorted(out.e2e["rejected_by_reason"].items())),
        },
        **({} if out.writer is None else {"task_writer": out.writer}),
    }


def write_collected(
    build: Path, config: BatConfig, out: Collected, sft_rows: list[SftRow], stats: sft.SliceStats
) -> dict[str, Any]:
    """Write a collected bank into the build directory (tasks, trajectories, SFT splits and rejections, RL rows and
    their index, E2E decisions, rewritten skills); returns the manifest's counts."""
    files = BankVersionLayout(build)
    write_jsonl(files.tasks, out.tasks)
    write_jsonl(files.trajectories, out.trajectories)
    for split in SFT_SPLIT_FILES:
        write_jsonl(files.sft_split(split), [r for r in sft_rows if r.split == split])
    atomic_write_json(files.sft_rejected, stats.as_dict())
    write_jsonl(files.rl_rows, out.rows)
    atomic_write_json(files.rl_index, build_index(out.rows))
    atomic_write_json(files.e2e_acceptance, out.e2e["decisions"])
    write_skills_file(files.skills, config)
    return _counts(config, out, sft_rows, stats)


def synthesize(config: BatConfig, layout: RunLayout, refresh: int = 0) -> tuple[store.BankVersion, bool]:
    """Build the next bank version for `config` at refresh index `refresh` (`refreshed_config`), or return the
    existing one with the same fingerprint (reused=True). The manifest records the refresh index and bank seed, the
    steering, and (LLM skill writer) where each stage's skill text came from (`bat.bank.skill_writer`)."""
    if config.benchmark.name != "builtin":
        from bat.bank.plugin_synth import synthesize_plugin

        return synthesize_plugin(config, layout, refresh)
    config, steered = steering(refreshed_config(config, refresh), layout, refresh)
    config, skills = skill_writer.prescribe(config, layout, refresh)
    fp = fingerprint(config)
    existing = store.find_by_fingerprint(layout, fp)
    if existing is not None:
        return existing, True

    def fill(build: Path) -> dict[str, Any]:
        out = collect(config, layout, build, layout.bank_scratch(fp[:16]))
        sft_rows, stats = slice_sft(config, out)
        return write_collected(build, config, out, sft_rows, stats)

    fields = {
        "fingerprint": fp,
        "generator_versions": _generator_versions(config),
        "seeds": {"bank": bank_seed(config), "practice_root": config.benchmark.practice_seed, "refresh": refresh},
        "reduction_grid": config.bank.reduction_grid,
        "stages": [s.key for s in config.stages],
        "tracks": bank_tracks(config),
        "config": {
            "bank": config.bank.model_dump(mode="json"),
            "benchmark": config.benchmark.model_dump(
                mode="json", exclude={"contract"} if config.benchmark.contract.is_builtin() else set()
            ),
            "steering": steered,
        },
    }
    if skills is not None:
        fields["config"]["skills"] = skills
    return store.write_version(layout, fill, fields, resume_key=fp[:16]), False


def _generator_versions(config: BatConfig) -> dict[str, str]:
    """Versions of every generator whose output lands in the bank (bank, the reduction grid it uses, benchmark suite
    + grader). Grids are immutable once released, so only the configured one (`bank.reduction_grid`) shapes the bank:
    releasing a new grid version leaves the fingerprint of a bank on an older one unchanged."""
    from bat.benchmark import GENERATOR_VERSION, HARNESS_VERSION

    # "benchmark_suite" names the practice generator: the bank holds practice instances, never held-out ones
    return {
        "bank": rows.GENERATOR_VERSION,
        "reduction_grids": config.bank.reduction_grid,
        "benchmark_suite": GENERATOR_VERSION,
        "benchmark_grader": HARNESS_VERSION,
        "teacher": "bat.benchmark.agents",
    }
