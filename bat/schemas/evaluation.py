"""Evaluation records: raw held-out runs (held-out side only) and the aggregates that cross to training.

Scores are on [0, 1], unrounded. `None` means an infrastructure-null cell (judge down, harness error), never 0.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from bat.schemas.breakdown import FailureSummary

EVAL_SCHEMA_VERSION = 1
Split = Literal["controller", "final", "test"]
SPLITS: tuple[str, ...] = ("controller", "final", "test")
METRICS: tuple[str, ...] = ("overall", "task", "agentic")


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EvalRun(_Record):
    """One held-out agent run (one track x one repeat). Lives only under `state/<run>/heldout/`."""

    schema_version: int = EVAL_SCHEMA_VERSION
    run_id: str
    split: Split
    track: str
    repeat: int = Field(ge=0)
    seed: int
    instance_id: str = ""
    """Held-out instance identifier (never leaves the held-out side)."""
    stages: dict[str, float | None] = Field(default_factory=dict)
    """Stage key -> score; a missing key = stage does not apply; None = infrastructure-null."""
    task: float | None = None
    agentic: float | None = None
    overall: float | None = None
    breach: bool = False
    null_reason: str | None = None
    """Why a cell is null (e.g. `judge unavailable`), when any is."""
    end_reason: str = ""
    turns: int = 0
    duration_s: float = 0.0


class NullCell(_Record):
    """A (track, repeat, field) cell whose value is missing for infrastructure reasons."""

    track: str
    repeat: int
    field: str
    reason: str | None = None


class TrackAggregate(_Record):
    """Mean over the repeats of one track; a metric is None when any of its cells is null."""

    track: str
    n_runs: int
    n_null: int = 0
    stages: dict[str, float | None] = Field(default_factory=dict)
    task: float | None = None
    agentic: float | None = None
    overall: float | None = None
    breaches: int = 0


class EvalAggregate(_Record):
    """What the training side may read: aggregate numbers, counts, digests, versions. No task content."""

    schema_version: int = EVAL_SCHEMA_VERSION
    round: int
    split: Split
    checkpoint: str
    """Checkpoint directory that was evaluated (a training-side path)."""
    checkpoint_digest: str
    suite_version: str
    harness_version: str
    manifest_digest: str
    """sha256 of the full manifest kept on the held-out side."""
    stage_keys: list[str]
    stages: dict[str, float | None]
    task: float | None
    agentic: float | None
    overall: float | None
    half_widths: dict[str, float | None] = Field(default_factory=dict)
    """Metric (overall/task/agentic/stage key) -> t-based half-width across track means."""
    confidence: float = 0.95
    tracks: dict[str, TrackAggregate]
    n_runs: int
    null_cells: list[NullCell] = Field(default_factory=list)
    routable: bool
    """False while any null cell is present: routing stops until it is repaired."""
    failures: FailureSummary | None = None
    """Counts of how runs ended, where they stalled and what their turns did wrong (no content); None for
    evaluations without transcripts (an external evaluator)."""


class RunEntry(_Record):
    """One line of the manifest: which run, which seed, which instance."""

    run_id: str
    track: str
    repeat: int
    seed: int
    instance_id: str


class EvalManifest(_Record):
    """Complete manifest of one evaluation (held-out side): checkpoint digest, seeds, versions, runs."""

    schema_version: int = EVAL_SCHEMA_VERSION
    round: int
    split: Split
    checkpoint: str
    checkpoint_digest: str
    suite_version: str
    harness_version: str
    code_version: str
    config_hash: str
    run_seed: int
    evaluator: str
    sampling: dict[str, float | int] = Field(default_factory=dict)
    runs: list[RunEntry]
    created_at: str


class PairedComparison(_Record):
    """Per-track paired comparison of two evaluations on the same suite (delta = b - a)."""

    schema_version: int = EVAL_SCHEMA_VERSION
    metric: str
    a_checkpoint: str
    b_checkpoint: str
    deltas: dict[str, float]
    mean_delta: float
    half_width: float | None
    t_stat: float | None
    p_value: float | None
    n_tracks: int
