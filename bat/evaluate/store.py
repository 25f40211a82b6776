"""Where evaluation outputs live: aggregates on the training side, raw runs + manifests on the held-out side."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bat.schemas.breakdown import Transcript
from bat.schemas.evaluation import SPLITS, EvalAggregate, EvalManifest, EvalRun
from bat.state.atomic import atomic_write_json, read_json
from bat.state.jsonl import read_jsonl, write_jsonl
from bat.state.layout import RunLayout

EVAL_PHASE = "evaluate"
FINAL_TEST_PHASE = "final_test"


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"unknown evaluation split {split!r}; valid: {list(SPLITS)}")


BASE_VARIANT = "base"
"""Variant of round 0's controller evaluation that scores the untrained base policy (`evaluate.base_model`)."""


def aggregate_path(
    layout: RunLayout, round_index: int, split: str, phase: str = EVAL_PHASE, variant: str | None = None
) -> Path:
    """Training-side aggregate file: `round_NN/<phase>/aggregate_<split>.json` (`aggregate_<split>_<variant>.json`
    for a variant such as the base policy's)."""
    _check_split(split)
    return layout.round(round_index).aggregate(split, phase, variant)


def heldout_runs_path(layout: RunLayout, round_index: int, split: str, variant: str | None = None) -> Path:
    """Held-out raw run records: `heldout/round_NN/[<variant>/]<split>/runs.jsonl`."""
    _check_split(split)
    return layout.heldout_run_records(round_index, split, variant)


def heldout_manifest_path(layout: RunLayout, round_index: int, split: str, variant: str | None = None) -> Path:
    _check_split(split)
    return layout.heldout_manifest(round_index, split, variant)


def write_aggregate(layout: RunLayout, agg: EvalAggregate, phase: str = EVAL_PHASE, variant: str | None = None) -> Path:
    """Atomically write the aggregate (the only evaluation file on the training side)."""
    return atomic_write_json(aggregate_path(layout, agg.round, agg.split, phase, variant), agg)


def load_aggregate(
    layout: RunLayout, round_index: int, split: str = "controller", phase: str = EVAL_PHASE, variant: str | None = None
) -> EvalAggregate | None:
    """The aggregate of `round_index`/`split`, or None when that evaluation has not been written."""
    path = aggregate_path(layout, round_index, split, phase, variant)
    if not path.exists():
        return None
    return EvalAggregate.model_validate(read_json(path))


def write_heldout(
    layout: RunLayout,
    round_index: int,
    split: str,
    runs: Sequence[EvalRun],
    manifest: EvalManifest,
    *,
    keep_raw: bool,
    variant: str | None = None,
) -> list[Path]:
    """Write the manifest (always) and the raw runs (when `keep_raw`) on the held-out side; returns the paths."""
    written = [atomic_write_json(heldout_manifest_path(layout, round_index, split, variant), manifest)]
    raw = heldout_runs_path(layout, round_index, split, variant)
    if keep_raw:
        write_jsonl(raw, runs)
        written.append(raw)
    elif raw.exists():
        raw.unlink()
    return written


def read_heldout_runs(layout: RunLayout, round_index: int, split: str, variant: str | None = None) -> list[EvalRun]:
    """Raw runs of one evaluation (held-out side; only evaluation phases may call this)."""
    path = heldout_runs_path(layout, round_index, split, variant)
    return read_jsonl(path, EvalRun) if path.exists() else []


def partial_runs_path(layout: RunLayout, round_index: int, split: str, variant: str | None = None) -> Path:
    """Runs finished so far (appended one by one) so an interrupted evaluation resumes."""
    _check_split(split)
    return layout.heldout_partial(round_index, split, variant)


def partial_transcripts_path(layout: RunLayout, round_index: int, split: str, variant: str | None = None) -> Path:
    """Transcripts of the runs finished so far (appended beside the partial runs)."""
    _check_split(split)
    return layout.heldout_partial_transcripts(round_index, split, variant)


def write_transcripts(
    layout: RunLayout, round_index: int, split: str, transcripts: Sequence[Transcript], variant: str | None = None
) -> Path:
    """Every run's transcript and breakdown on the held-out side (`transcripts.jsonl`)."""
    _check_split(split)
    path = layout.heldout_transcripts(round_index, split, variant)
    write_jsonl(path, transcripts)
    return path
