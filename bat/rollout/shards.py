"""Rollout shards: `rollout/shard_NNNN/{rollouts.jsonl, timings.jsonl, evidence/, DONE.json}` (`ShardLayout`).

A shard directory is built under a temp name and renamed into place whole (DONE.json inside, written
last), so a shard either exists complete or not at all; resume skips shards that have DONE.json.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bat.rollout.breakdown import summarise
from bat.rollout.spec import RolloutOutcome
from bat.rollout.workspace import copy_evidence
from bat.schemas.breakdown import RunBreakdown, ShardBreakdown
from bat.schemas.rollout import RolloutRecord
from bat.state.atomic import atomic_dir, atomic_write_json, read_json
from bat.state.digest import sha256_path
from bat.state.jsonl import read_jsonl, write_jsonl
from bat.state.round_layout import ShardLayout, partial_shard_dirs, shard_dir, shard_layout
from bat.state.round_layout import finished_shards as finished_shard_layouts


def shard_done(phase_dir: Path, index: int) -> bool:
    """True when shard `index` is complete (its DONE.json exists)."""
    return shard_layout(phase_dir, index).is_done()


def finished_shards(phase_dir: Path) -> list[Path]:
    """Complete shard directories, in index order (partial temp dirs are ignored)."""
    return [s.path for s in finished_shard_layouts(phase_dir)]


def write_shard(
    phase_dir: Path,
    index: int,
    outcomes: Sequence[RolloutOutcome],
    workspaces: dict[str, Path | None],
    meta: dict[str, Any],
    breakdowns: Sequence[RunBreakdown] = (),
) -> Path:
    """Write one complete shard atomically: records, timings, evidence copies, the failure breakdown (when given),
    then DONE.json; returns its dir."""
    final = shard_dir(phase_dir, index)
    with atomic_dir(final) as tmp:
        shard = ShardLayout(tmp)
        records: list[RolloutRecord] = []
        for outcome in outcomes:
            rec = outcome.record
            rel = f"{shard.evidence_name}/{rec.rollout_id}"
            kept = copy_evidence(workspaces.get(rec.rollout_id), tmp / rel)
            records.append(rec.model_copy(update={"evidence_dir": rel if kept else None}))
        write_jsonl(shard.rollouts, records)
        write_jsonl(shard.timings, [{"rollout_id": o.record.rollout_id, "turns": o.timings} for o in outcomes])
        if breakdowns:
            atomic_write_json(shard.breakdown, ShardBreakdown(summary=summarise(breakdowns), runs=list(breakdowns)))
        atomic_write_json(
            shard.done,
            {
                "shard": index,
                "rollouts": len(records),
                "valid": sum(r.valid for r in records),
                "state_ids": sorted({r.state_id for r in records}),
                "end_reasons": dict(sorted(Counter(r.end_reason for r in records).items())),
                "generated_tokens": sum(r.response_tokens for r in records),
                "rollouts_sha256": sha256_path(shard.rollouts),
                **meta,
            },
        )
    return final


def read_shard(directory: Path) -> list[RolloutRecord]:
    """Records of one complete shard; raises if it has no DONE.json."""
    shard = ShardLayout(Path(directory))
    if not shard.is_done():
        raise FileNotFoundError(f"{shard.path}: shard is not complete (no {shard.done.name})")
    return read_jsonl(shard.rollouts, RolloutRecord)


def read_rollouts(phase_dir: Path) -> list[RolloutRecord]:
    """Every record of every complete shard under a rollout phase dir, shard order then record order."""
    return [rec for d in finished_shards(phase_dir) for rec in read_shard(d)]


def read_timings(directory: Path) -> dict[str, list[dict[str, Any]]]:
    """rollout_id -> per-turn volatile timing fields of one shard."""
    return {row["rollout_id"]: row["turns"] for row in read_jsonl(ShardLayout(Path(directory)).timings)}


def shard_meta(directory: Path) -> dict[str, Any]:
    """The shard's DONE.json contents."""
    return read_json(ShardLayout(Path(directory)).done)


def clear_partial(phase_dir: Path) -> list[Path]:
    """Remove temp dirs left by interrupted shard writes (`.shard_NNNN.*`); complete shards are untouched."""
    removed = partial_shard_dirs(phase_dir)
    for p in removed:
        shutil.rmtree(p, ignore_errors=True)
    return removed


def read_breakdown(directory: Path) -> ShardBreakdown | None:
    """The shard's failure breakdown, or None for a shard written without one."""
    path = ShardLayout(Path(directory)).breakdown
    return ShardBreakdown.model_validate(read_json(path)) if path.exists() else None
