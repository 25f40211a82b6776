"""Records of the lr probe (`bat train lr-probe`, `bat.curriculum.lr_probe`): one row per scale of a one-step GRPO
round's step, and the probe's file of rows. Written under the probe's output folder only."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class LrProbeRow(BaseModel):
    """One scale: its lr, checkpoint, KL to the start policy and (when evaluated) its controller evaluation."""

    model_config = ConfigDict(extra="forbid")

    scale: float
    """The step's multiple (0: the start checkpoint, 1: the recorded candidate)."""
    lr: float
    """`scale x` the step's lr."""
    checkpoint: str
    kl_to_start: float | None
    """KL to the start on the bank's KL probe rows; None without probe rows."""
    evaluated: bool = True
    """False for a KL-only screen (the evaluation's fields stay empty)."""
    overall: float | None = None
    task: float | None = None
    agentic: float | None = None
    stages: dict[str, float | None] = Field(default_factory=dict)
    n_runs: int = 0
    seconds: float = 0.0


class LrProbeResults(BaseModel):
    """`<out>/lr_probe.json`: the probed round, its run, the step's lr and one row per scale asked for."""

    model_config = ConfigDict(extra="forbid")

    round: int
    run: str
    lr: float
    rows: list[LrProbeRow]
