"""`bat evaluate explain DIR [--run ID]`: the failure breakdown of any evaluation or rollout folder, or one run's
transcript.

Reads (never writes) one of:
* a round's evaluation folder (`round_NN/evaluate`, `round_NN/final_test`): the `failures` counts of each
  `aggregate_*.json`; `--run` opens the matching held-out transcripts (`heldout/round_NN/[variant/]split/`);
* a held-out evaluation folder (`heldout/round_NN/<split>`): its `transcripts.jsonl`;
* a rollout shard (`round_NN/rollout/shard_NNNN`) or the rollout folder holding shards: `breakdown.json` and the
  shard's records.
This is a reader's tool: training phases never call it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from bat.evaluate.store import EVAL_PHASE
from bat.rollout.breakdown import format_summary, format_transcript, summarise
from bat.rollout.shards import finished_shards, read_breakdown, read_shard
from bat.schemas.breakdown import RunBreakdown, Transcript
from bat.schemas.evaluation import SPLITS, EvalAggregate
from bat.state.atomic import read_json
from bat.state.jsonl import read_jsonl
from bat.state.layout import TRANSCRIPTS_NAME, RunLayout
from bat.state.round_layout import ShardLayout

AGGREGATE_NAME = re.compile(r"^aggregate_(?P<split>[a-z]+)(?:_(?P<variant>[A-Za-z0-9-]+))?\.json$")


class ExplainError(ValueError):
    """DIR is not a folder `explain` can read, or the run id is not in it."""


def explain(directory: Path, run_id: str | None = None) -> str:
    """Markdown text: the breakdown of `directory`, or the transcript of `run_id` found there."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ExplainError(f"{directory}: no such folder")
    if ShardLayout(directory).breakdown.exists() or ShardLayout(directory).rollouts.exists():
        return _explain_shards([directory], run_id, f"rollout shard {directory}")
    shards = finished_shards(directory)
    if shards:
        return _explain_shards(shards, run_id, f"rollout folder {directory} ({len(shards)} shards)")
    held = directory / TRANSCRIPTS_NAME
    if held.exists():
        return _explain_transcripts(read_jsonl(held, Transcript), run_id, f"held-out evaluation {directory}")
    aggregates = sorted(p for p in directory.glob("aggregate_*.json") if AGGREGATE_NAME.match(p.name))
    if aggregates:
        return _explain_aggregates(directory, aggregates, run_id)
    raise ExplainError(
        f"{directory}: not an evaluation folder (round_NN/{EVAL_PHASE} with aggregate_*.json), a held-out "
        "evaluation folder (heldout/round_NN/<split> with transcripts.jsonl) or a rollout shard (shard_NNNN)"
    )


def _explain_shards(shards: Sequence[Path], run_id: str | None, title: str) -> str:
    runs: list[RunBreakdown] = []
    for shard in shards:
        found = read_breakdown(shard)
        if found is None:
            raise ExplainError(f"{shard}: written without a failure breakdown (breakdown.json); re-run its rollouts")
        runs += found.runs
    if run_id is None:
        return format_summary(summarise(runs), f"Failure breakdown of {title}")
    verdict = next((b for b in runs if b.run_id == run_id), None)
    record = next((r for shard in shards for r in read_shard(shard) if r.rollout_id == run_id), None)
    if verdict is None or record is None:
        raise ExplainError(f"{title}: no rollout {run_id!r}; rollouts: {[b.run_id for b in runs][:20]}")
    transcript = Transcript(run_id=run_id, end_reason=record.end_reason, turns=record.turns, breakdown=verdict)
    return format_transcript(transcript)


def _explain_transcripts(transcripts: Sequence[Transcript], run_id: str | None, title: str) -> str:
    if run_id is None:
        breakdowns = [t.breakdown for t in transcripts if t.breakdown is not None]
        return format_summary(summarise(breakdowns), f"Failure breakdown of {title}") + _run_table(breakdowns)
    found = next((t for t in transcripts if t.run_id == run_id), None)
    if found is None:
        raise ExplainError(f"{title}: no run {run_id!r}; runs: {[t.run_id for t in transcripts]}")
    return format_transcript(found)


def _run_table(breakdowns: Sequence[RunBreakdown]) -> str:
    lines = ["", "| run | track | ended by | stalled at | turns | first failure |", "|---|---|---|---|---|---|"]
    for b in breakdowns:
        first = next((f"{v.index}: {v.kind}" for v in b.turns if v.kind != "ok"), "-")
        lines.append(f"| {b.run_id} | {b.track} | {b.end_reason} | {b.stalled} | {len(b.turns)} | {first} |")
    return "\n".join(lines) + "\n"


def _round_of(directory: Path) -> tuple[Path, int]:
    match = re.match(r"^round_(\d+)$", directory.resolve().parent.name)
    if not match:
        raise ExplainError(f"{directory}: an evaluation folder sits in a round folder (round_NN/{EVAL_PHASE})")
    return directory.resolve().parent.parent, int(match.group(1))


def _explain_aggregates(directory: Path, aggregates: Sequence[Path], run_id: str | None) -> str:
    if run_id is None:
        parts = []
        for path in aggregates:
            agg = EvalAggregate.model_validate(read_json(path))
            if agg.failures is None:
                parts.append(f"### {path.name}: written without failure counts\n")
            else:
                parts.append(format_summary(agg.failures, f"Failure breakdown of {path.name}"))
        return "\n".join(parts)
    root, round_index = _round_of(directory)
    layout = RunLayout(root)
    searched = []
    for path in aggregates:
        match = AGGREGATE_NAME.match(path.name)
        split, variant = match["split"], match["variant"]
        if split not in SPLITS:
            continue
        held = layout.heldout_transcripts(round_index, split, variant)
        searched.append(str(held))
        if held.exists():
            found = next((t for t in read_jsonl(held, Transcript) if t.run_id == run_id), None)
            if found is not None:
                return format_transcript(found)
    raise ExplainError(f"no transcript of run {run_id!r} in {searched or 'any held-out folder'}")
