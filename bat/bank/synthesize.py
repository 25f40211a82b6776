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
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.bank import checks, e2e, practice, rows, sft, skill_writer, store, task_writer
from bat.bank import tasks as tasks_mod
from bat.bank.collected import Collected, bank_counts, leak_scanner, write_collected
from bat.bank.practice import bank_tracks
from bat.bank.seeding import (
    CONTENT_NEUTRAL,
    WRITER_KNOBS,
    bank_seed,
    refreshed_config,
    steered_track_tasks,
    steering,
)
from bat.schemas.bank import PracticeTask, SftRow
from bat.seeds import derive_seed
from bat.state.layout import RunLayout

if TYPE_CHECKING:
    from bat.config.root import BatConfig

__all__ = [  # the seeding and collecting helpers stay importable from here
    "CONTENT_NEUTRAL",
    "WRITER_KNOBS",
    "Collected",
    "bank_counts",
    "bank_seed",
    "fingerprint",
    "leak_scanner",
    "refreshed_config",
    "steered_track_tasks",
    "steering",
    "synthesize",
    "write_collected",
]


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
    scanner = leak_scanner(config, layout)
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
    return sft.slice_trajectories(
        use,
        split_seed=derive_seed(bank_seed(config), "sft_split"),
        validation_fraction=config.bank.validation_fraction,
        e2e_ids=out.e2e_trajectory_ids,
        recovery_skip=lambda traj: checks.flawed_pilot_turns(traj.turns),
        skills=skills,
        stage_order=order,
        meter=meter,
        max_length=config.bank.sft_max_length,
        stage_names=names,
        agent_context=config.bank.sft_context == "agent",
    )


def _meter(config: BatConfig) -> sft.LengthMeter:
    if config.bank.sft_tokenizer is None:
        return sft.ApproxLengthMeter(config.bank.approx_chars_per_token)
    from bat.benchmark import TOOL_SPECS
    from bat.policy.loader import load_tokenizer

    return sft.TokenLengthMeter(load_tokenizer(config.bank.sft_tokenizer), TOOL_SPECS)


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
