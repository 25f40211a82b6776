"""Builders of aggregate records for outer-loop tests (aggregate numbers only, as routing sees them)."""

from __future__ import annotations

from bat.schemas.evaluation import EvalAggregate, TrackAggregate

STAGES = ("S1", "S2", "S3", "S4", "S5")
TRACKS = ("classification", "detection", "segmentation")


def build_agg(round_index: int, overall: float, *, task: float | None = None, stages: dict | None = None,
              tracks: dict | None = None, checkpoint: str | None = None) -> EvalAggregate:
    stages = stages or {k: overall for k in STAGES}
    task = overall if task is None else task
    tracks = tracks or {t: overall for t in TRACKS}
    return EvalAggregate(
        round=round_index, split="controller", checkpoint=checkpoint or f"ckpt/r{round_index}",
        checkpoint_digest=f"d{round_index}", suite_version="suite-1", harness_version="h-1", manifest_digest="m",
        stage_keys=list(STAGES), stages=dict(stages), task=task, agentic=2 * overall - task, overall=overall,
        half_widths={}, tracks={t: TrackAggregate(track=t, n_runs=2, overall=v, task=v, agentic=v) for t, v in tracks.items()},
        n_runs=2 * len(tracks), routable=True,
    )
