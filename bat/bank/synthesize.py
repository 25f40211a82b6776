"""The data factory: practice tasks -> teacher trajectories -> stage states + E2E surrogates + SFT slices -> bank vNNNN.

Reads: config (bank, benchmark, sandbox, stages, leakage), the benchmark's practice seed space.
Writes: one new immutable `RunLayout.bank(v)` (see `bat.bank` for the files). Same config + seed -> same
fingerprint -> the existing version is reused (no-op); content is byte-identical for a given seed.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.bank import checks, e2e, practice, rows, sft, store
from bat.bank.replay import replay_and_pack
from bat.bank.teacher import TeacherRun, run_llm, run_scripted
from bat.schemas.bank import E2E, BankRow, PracticeTask, SftRow, Trajectory
from bat.seeds import derive_seed
from bat.state.atomic import atomic_write_json
from bat.state.jsonl import write_jsonl
from bat.state.layout import RunLayout

if TYPE_CHECKING:
    from bat.config.root import BatConfig


def bank_seed(config: "BatConfig") -> int:
    """`bank.seed`, or the run seed when unset."""
    return config.run.seed if config.bank.seed is None else config.bank.seed


def fingerprint(config: "BatConfig") -> str:
    """Digest of everything that determines a bank's content (generator version, bank/benchmark/stage config, seed)."""
    payload = {
        "generator": rows.GENERATOR_VERSION,
        "seed": bank_seed(config),
        "bank": config.bank.model_dump(mode="json"),
        "benchmark": config.benchmark.model_dump(mode="json"),
        "stages": [s.model_dump(mode="json") for s in config.stages],
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()


def bank_tracks(config: "BatConfig") -> list[str]:
    """Tracks to synthesise (bank.tracks or every benchmark track); unknown names raise listing the valid ones."""
    valid = list(config.benchmark.tracks)
    chosen = list(config.bank.tracks or valid)
    unknown = [t for t in chosen if t not in valid]
    if unknown:
        raise ValueError(f"bank.tracks has unknown tracks {unknown}; valid (benchmark.tracks): {valid}")
    return chosen


@dataclass
class Collected:
    """Everything one synthesis pass produces before it is written."""

    tasks: list[PracticeTask] = field(default_factory=list)
    trajectories: list[Trajectory] = field(default_factory=list)
    e2e_trajectory_ids: set[str] = field(default_factory=set)
    rows: list[BankRow] = field(default_factory=list)
    unchecked: Counter = field(default_factory=Counter)
    e2e: dict[str, Any] = field(default_factory=lambda: {"candidates": 0, "accepted": 0, "rejected_by_reason": Counter(), "decisions": {}})


def _teach(task: PracticeTask, instance: Any, workdir: Path, config: "BatConfig", client: Any) -> TeacherRun:
    if config.bank.teacher == "llm":
        return run_llm(instance, client, workdir, config, config.bank.rollout_limit_h)
    return run_scripted(instance, task.variant, workdir, config)


def _trajectory(task: PracticeTask, run: TeacherRun, outcome: str, problems: list[str]) -> Trajectory:
    s = run.score
    return Trajectory(
        trajectory_id=f"trj.{task.task_id}", task=task, outcome=outcome, teacher=run.teacher, brief=run.brief,  # type: ignore[arg-type]
        turns=run.turns, stage_scores=dict(s.stages), task_score=s.task, overall=s.overall,
        checked=not problems, check_failures=problems,
    )


def _stage_task(task: PracticeTask, build: Path, scratch: Path, config: "BatConfig", client: Any, out: Collected) -> None:
    """Teacher run -> checked trajectory -> stage states by prefix replay -> RL rows."""
    from bat.benchmark.agents import outcome_of

    order = [s.key for s in config.stages]
    instance = practice.instance_for(task, config)
    run = _teach(task, instance, scratch / "teacher", config, client)
    wanted = {v: k for k, v in practice.VARIANT_FOR.items()}.get(task.variant, "success")
    outcome = outcome_of(run.score) if config.bank.teacher == "llm" else wanted
    problems = checks.check_run(outcome, run.score, run.turns, order)
    traj = _trajectory(task, run, outcome, problems)
    out.trajectories.append(traj)
    if problems:
        out.unchecked[outcome] += 1
        return
    starts = checks.state_starts(outcome, run.turns, run.score, order)
    ids = {stage: f"{task.task_id}.{stage}" for stage in starts}
    seeds = {"task": task.seed}
    meta = {s: {"state_id": ids[s], "stage": s, "outcome": outcome, "track": task.track, "task_id": task.task_id,
                "generator": f"{rows.GENERATOR}:{rows.GENERATOR_VERSION}"} for s in starts}
    dests = {s: build / store.STATES / ids[s] for s in starts}
    manifests = replay_and_pack(instance, run.turns, starts, scratch / "replay", config, dests, meta)
    for stage in sorted(starts, key=order.index):
        out.rows.append(rows.build_row(
            state_id=ids[stage], stage=stage, outcome=outcome, task=task, brief=run.brief, manifest=manifests[stage],
            prefix=run.turns[: starts[stage]], trajectory_id=traj.trajectory_id, teacher=run.teacher, seeds=seeds, config=config,
        ))


def _e2e_task(task: PracticeTask, build: Path, scratch: Path, config: "BatConfig", client: Any, scanner: Any, out: Collected) -> None:
    """Reduced task -> teacher trajectory -> package of the fresh workspace -> Eq. 15 -> accepted E2E row."""
    assert task.reduction is not None
    out.e2e["candidates"] += 1
    instance = practice.instance_for(task, config)
    run = _teach(task, instance, scratch / "teacher", config, client)
    state_id = f"{task.task_id}.{E2E}"
    dest = build / store.STATES / state_id
    meta = {"state_id": state_id, "stage": E2E, "outcome": "success", "track": task.track, "task_id": task.task_id,
            "reduction": task.reduction.model_dump(mode="json"), "generator": f"{rows.GENERATOR}:{rows.GENERATOR_VERSION}"}
    manifest = replay_and_pack(instance, run.turns, {E2E: 0}, scratch / "replay", config, {E2E: dest}, {E2E: meta})[E2E]
    trajectory_id = f"trj.{task.task_id}"
    row = rows.build_row(state_id=state_id, stage=E2E, outcome="success", task=task, brief=run.brief, manifest=manifest,
                         prefix=[], trajectory_id=trajectory_id, teacher=run.teacher, seeds={"task": task.seed}, config=config)
    verdict = e2e.accept(state_dir=dest, turns=run.turns, score=run.score, reduction=task.reduction, row=row,
                         scanner=scanner, workdir=scratch / "boot", config=config)
    out.e2e["decisions"][state_id] = verdict.as_dict()
    out.trajectories.append(_trajectory(task, run, "success", verdict.reasons))
    if not verdict.accepted:
        for reason in verdict.reasons:
            out.e2e["rejected_by_reason"][reason.split(":")[0].split(" ")[0]] += 1
        shutil.rmtree(dest, ignore_errors=True)
        return
    out.e2e["accepted"] += 1
    out.e2e_trajectory_ids.add(trajectory_id)
    out.rows.append(row)


def _scanner(config: "BatConfig", layout: RunLayout) -> Any | None:
    if not config.leakage.enabled:
        return None
    from bat.leakage.preflight import ensure_index
    from bat.leakage.scanner import Scanner

    return Scanner(ensure_index(layout, config))


def _client(config: "BatConfig") -> Any:
    if config.bank.teacher != "llm":
        return None
    from bat.bank.llm_client import ChatClient

    return ChatClient(config.bank.llm)


def collect(config: "BatConfig", layout: RunLayout, build: Path) -> Collected:
    """Run every planned task; state packages are written under `build/states/`."""
    seed, tracks = bank_seed(config), bank_tracks(config)
    out = Collected(tasks=practice.plan_tasks(config, seed, tracks) + practice.plan_e2e_tasks(config, seed, tracks))
    client, scanner = _client(config), _scanner(config, layout)
    layout.scratch_dir.mkdir(parents=True, exist_ok=True)
    for task in out.tasks:
        with tempfile.TemporaryDirectory(prefix="bank-", dir=layout.scratch_dir) as tmp:
            if task.reduction is None:
                _stage_task(task, build, Path(tmp), config, client, out)
            else:
                _e2e_task(task, build, Path(tmp), config, client, scanner, out)
    return out


def slice_sft(config: "BatConfig", out: Collected) -> tuple[list[SftRow], sft.SliceStats]:
    """SFT rows of every checked trajectory whose label is in `bank.sft_outcomes` (plus accepted E2E ones)."""
    from bat.benchmark import STAGE_SKILLS

    order = [s.key for s in config.stages]
    names = {s.key: s.name for s in config.stages}
    meter = _meter(config)
    use = [t for t in out.trajectories if t.checked and (t.trajectory_id in out.e2e_trajectory_ids or
                                                          (t.task.reduction is None and t.outcome in config.bank.sft_outcomes))]
    splits = sft.split_by_trajectory([t.trajectory_id for t in use], config.bank.validation_fraction,
                                     derive_seed(bank_seed(config), "sft_split"))
    stats = sft.SliceStats()
    sliced: list[SftRow] = []
    for traj in use:
        sliced += sft.slice_trajectory(traj, skills=STAGE_SKILLS, stage_order=order, meter=meter,
                                       max_length=config.bank.sft_max_length, split=splits[traj.trajectory_id],
                                       stats=stats, stage_names=names, e2e=traj.trajectory_id in out.e2e_trajectory_ids)
    return sliced, stats


def _meter(config: "BatConfig") -> sft.LengthMeter:
    if config.bank.sft_tokenizer is None:
        return sft.ApproxLengthMeter(config.bank.approx_chars_per_token)
    from bat.benchmark import TOOL_SPECS
    from bat.policy.loader import load_tokenizer

    return sft.TokenLengthMeter(load_tokenizer(config.bank.sft_tokenizer), TOOL_SPECS)


def _counts(config: "BatConfig", out: Collected, sft_rows: list[SftRow], stats: sft.SliceStats) -> dict[str, Any]:
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
        "sft": {"train": sum(r.split == "train" for r in sft_rows), "validation": sum(r.split == "validation" for r in sft_rows),
                "by_stage": dict(sorted(by_stage.items())), "rejected": stats.as_dict()},
        "e2e": {"candidates": out.e2e["candidates"], "accepted": out.e2e["accepted"],
                "rejected_by_reason": dict(sorted(out.e2e["rejected_by_reason"].items()))},
    }


def synthesize(config: "BatConfig", layout: RunLayout) -> tuple[store.BankVersion, bool]:
    """Build the next bank version for `config` (or return the existing one with the same fingerprint, reused=True)."""
    fp = fingerprint(config)
    existing = store.find_by_fingerprint(layout, fp)
    if existing is not None:
        return existing, True

    def fill(build: Path) -> dict[str, Any]:
        out = collect(config, layout, build)
        sft_rows, stats = slice_sft(config, out)
        write_jsonl(build / store.TASKS, out.tasks)
        write_jsonl(build / store.TRAJECTORIES, out.trajectories)
        for split, rel in store.SFT_SPLITS.items():
            write_jsonl(build / rel, [r for r in sft_rows if r.split == split])
        atomic_write_json(build / store.SFT_REJECTED, stats.as_dict())
        write_jsonl(build / store.RL_ROWS, out.rows)
        from bat.bank.pools import build_index

        atomic_write_json(build / store.RL_INDEX, build_index(out.rows))
        atomic_write_json(build / "e2e_acceptance.json", out.e2e["decisions"])
        return _counts(config, out, sft_rows, stats)

    fields = {
        "fingerprint": fp,
        "generator_versions": _generator_versions(),
        "seeds": {"bank": bank_seed(config), "practice_root": config.benchmark.practice_seed},
        "reduction_grid": config.bank.reduction_grid,
        "stages": [s.key for s in config.stages],
        "tracks": bank_tracks(config),
        "config": {"bank": config.bank.model_dump(mode="json"), "benchmark": config.benchmark.model_dump(mode="json")},
    }
    return store.write_version(layout, fill, fields), False


def _generator_versions() -> dict[str, str]:
    from bat.bank.reduction import GRIDS

    return {"bank": rows.GENERATOR_VERSION, "reduction_grids": ",".join(sorted(GRIDS)), "teacher_scripts": "bat.benchmark.agents"}
