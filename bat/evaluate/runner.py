"""One evaluation of one checkpoint on one split: resume, retry null runs, aggregate, write both sides.

Held-out side (`heldout/round_NN/<split>/`): `partial.jsonl` while running, then `runs.jsonl` (unless
`evaluate.keep_raw_runs` is false) and `manifest.json`; workspaces live under `work/` there and are removed.
Training side: `round_NN/<phase>/aggregate_<split>.json` only.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.evaluate.aggregate import aggregate_runs
from bat.evaluate.episodes import SCRIPTED_PREFIX, Driver, HeldoutRun, play, prepare_run, score_to_run
from bat.evaluate.manifest import build_manifest, checkpoint_digest, manifest_digest
from bat.evaluate.store import (
    EVAL_PHASE,
    partial_runs_path,
    partial_transcripts_path,
    write_aggregate,
    write_heldout,
    write_transcripts,
)
from bat.rollout.breakdown import summarise
from bat.schemas.breakdown import Transcript
from bat.schemas.evaluation import SPLITS, EvalAggregate, EvalRun, RunEntry
from bat.state.jsonl import append_jsonl, read_jsonl_resuming
from bat.state.layout import RunLayout

if TYPE_CHECKING:
    from bat.config.root import BatConfig


def suite_runs(cfg: BatConfig, layout: RunLayout, split: str) -> list[HeldoutRun]:
    """The held-out runs of `split`: the configured benchmark's tasks of that split (`benchmark.repeats_for(split)`
    per track, from `benchmark.heldout_seed` and the run's held-out secret), each with its policy sampling seed."""
    from bat.benchmark import run_secret
    from bat.benchmark.heldout_runs import heldout_run_id
    from bat.seeds import derive_seed
    from bat.staged.registry import from_config

    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid: {list(SPLITS)}")
    seed, count = cfg.benchmark.heldout_seed, cfg.benchmark.repeats_for(split)
    tasks = from_config(cfg).tasks(split, seed=seed, count=count, secret=run_secret(layout).key)
    tasks = [t for t in tasks if t.track in cfg.benchmark.tracks]
    return [
        HeldoutRun(
            heldout_run_id(split, t.track, t.repeat),
            split,
            t.track,
            t.repeat,
            derive_seed(seed, "sampling", split, t.track, t.repeat),
            t,
        )
        for t in tasks
    ]


def _versions(cfg: BatConfig) -> tuple[str, str]:
    """(suite version, harness version) of the configured benchmark."""
    from bat.staged.registry import from_config

    bench = from_config(cfg)
    return bench.version, bench.harness_version or bench.version


def _has_null(run: EvalRun) -> bool:
    return run.task is None or any(v is None for v in run.stages.values())


def _digest(checkpoint: str) -> str:
    if checkpoint.startswith(SCRIPTED_PREFIX):
        return "scripted:" + hashlib.sha256(checkpoint.encode("utf-8")).hexdigest()
    return checkpoint_digest(checkpoint)


def _resume(path: Path, model: Any) -> dict[str, Any]:
    finished, _ = read_jsonl_resuming(path, model) if path.exists() else ([], False)
    return {r.run_id: r for r in finished}


def play_runs(
    runs: Sequence[Any], driver: Driver, cfg: BatConfig, split: str, work_root: Path, partial: Path, transcripts: Path
) -> tuple[dict[str, EvalRun], dict[str, Transcript]]:
    """Play runs not yet finished in `partial` (resume), then retry null runs `evaluate.null_retries` times.
    Returns the runs and their transcripts by run id (transcripts are appended to `transcripts` as runs finish)."""
    done: dict[str, EvalRun] = _resume(partial, EvalRun)
    kept: dict[str, Transcript] = _resume(transcripts, Transcript)
    chunk = cfg.evaluate.parallel_runs
    for attempt in range(cfg.evaluate.null_retries + 1):
        pending = [r for r in runs if r.run_id not in done or (attempt > 0 and _has_null(done[r.run_id]))]
        if attempt > 0 and not pending:
            break
        for start in range(0, len(pending), chunk):
            prepared = [prepare_run(r, cfg, work_root) for r in pending[start : start + chunk]]
            results = play(prepared, driver, split, cfg)
            new = [t for _, t in results if t is not None]
            append_jsonl(transcripts, new)
            append_jsonl(partial, [r for r, _ in results])
            done.update({r.run_id: r for r, _ in results})
            kept.update({t.run_id: t for t in new})
            for item in prepared:
                item.env.close()
                shutil.rmtree(item.base, ignore_errors=True)
    return done, kept


def external_records(
    cfg: BatConfig, checkpoint: str, split: str, work: Path, run: dict[str, Any] | None = None
) -> list[EvalRun]:
    """Runs scored by the benchmark's external-evaluator adapter (`benchmark.kind = external`) for `split`, asked
    on behalf of `run` (the run identities the request carries, `bat.benchmark.external`)."""
    from bat.benchmark import run_external

    work.mkdir(parents=True, exist_ok=True)
    return [
        score_to_run(
            s,
            dict(
                run_id=f"{split}-{s.run_id}",
                split=split,
                track=s.track,
                repeat=s.repeat,
                seed=0,
                instance_id=s.instance_id,
                end_reason="external",
            ),
            cfg,
        )
        for s in run_external(checkpoint, work, cfg, split=split, run=run)
    ]


def evaluate_split(
    cfg: BatConfig,
    layout: RunLayout,
    round_index: int,
    split: str,
    checkpoint: str,
    driver: Driver,
    *,
    config_hash: str,
    phase: str = EVAL_PHASE,
    variant: str | None = None,
) -> tuple[EvalAggregate, list[Path]]:
    """Evaluate `checkpoint` on `split`; returns the aggregate and every file written (a `variant`, e.g. the base
    policy in round 0, gets its own held-out folder and aggregate file beside the round's own)."""
    work = layout.heldout_work(round_index, split, variant)
    partial = partial_runs_path(layout, round_index, split, variant)
    partial_transcripts = partial_transcripts_path(layout, round_index, split, variant)
    transcripts: list[Transcript] = []
    if cfg.benchmark.kind == "external" and not checkpoint.startswith(SCRIPTED_PREFIX):
        identity = {
            "run_dir": str(layout.root),
            "round": round_index,
            "phase": phase,
            "variant": variant,
            "config_hash": config_hash,
        }
        records = external_records(cfg, checkpoint, split, work, identity)
    else:
        runs = suite_runs(cfg, layout, split)
        done, kept = play_runs(runs, driver, cfg, split, work, partial, partial_transcripts)
        records = [done[r.run_id] for r in runs]
        transcripts = [kept[r.run_id] for r in runs if r.run_id in kept]
    suite_version, harness_version = _versions(cfg)
    digest = _digest(checkpoint)
    manifest = build_manifest(
        round_index=round_index,
        split=split,
        checkpoint=checkpoint,
        digest=digest,
        suite_version=suite_version,
        harness_version=harness_version,
        config_hash=config_hash,
        run_seed=cfg.run.seed,
        evaluator=cfg.benchmark.kind,
        sampling={"temperature": cfg.evaluate.temperature},
        runs=[
            RunEntry(run_id=r.run_id, track=r.track, repeat=r.repeat, seed=r.seed, instance_id=r.instance_id)
            for r in records
        ],
    )
    agg = aggregate_runs(
        records,
        stage_keys=cfg.stage_keys,
        round_index=round_index,
        checkpoint=checkpoint,
        checkpoint_digest=digest,
        suite_version=suite_version,
        harness_version=harness_version,
        manifest_digest=manifest_digest(manifest),
        confidence=cfg.evaluate.confidence,
    )
    if transcripts:
        agg = agg.model_copy(update={"failures": summarise([t.breakdown for t in transcripts if t.breakdown])})
    written = write_heldout(
        layout, round_index, split, records, manifest, keep_raw=cfg.evaluate.keep_raw_runs, variant=variant
    )
    if transcripts and cfg.evaluate.keep_transcripts:
        written.append(write_transcripts(layout, round_index, split, transcripts, variant))
    written.append(write_aggregate(layout, agg, phase, variant))
    partial.unlink(missing_ok=True)
    partial_transcripts.unlink(missing_ok=True)
    shutil.rmtree(work, ignore_errors=True)
    return agg, written
