"""Outer-loop records: gate checks, the auditable route decision, the next round's plan, the best checkpoint.

All score inputs are aggregate numbers read from `round_NN/evaluate/aggregate_controller.json`; none of these
records carries held-out content.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

ROUTING_SCHEMA_VERSION = 1
Pool = Literal["S-target", "S-mix", "E2E"]
POOLS: tuple[str, ...] = ("S-target", "S-mix", "E2E")
Action = Literal["promote", "hold", "fallback", "stop", "bootstrap", "continue"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GateCheck(_Record):
    """One promotion-gate threshold: the measured value, the bound and whether it held."""

    name: str
    value: float | None
    threshold: float
    passed: bool
    detail: str = ""


class GateResult(_Record):
    passed: bool
    checks: list[GateCheck] = Field(default_factory=list)

    @property
    def failed(self) -> list[str]:
        return [c.name for c in self.checks if not c.passed]


class DomainShift(_Record):
    """Domain-shift detector output: per-track deltas against the previous evaluation and whether they diverge."""

    detected: bool
    reason: str = ""
    track_deltas: dict[str, float] = Field(default_factory=dict)
    shifted_tracks: list[str] = Field(default_factory=list)


class TrainingHealth(_Record):
    """What the gate needs from training: metrics finite, aborted rollouts bounded."""

    metrics_finite: bool = True
    aborted: int = 0
    total: int = 0
    source: str = ""


class ScoreSnapshot(_Record):
    """The aggregate numbers of one evaluation that routing reads (copied into the decision for audit)."""

    round: int
    checkpoint: str
    checkpoint_digest: str
    overall: float
    task: float
    agentic: float
    stages: dict[str, float]
    tracks: dict[str, float]
    """Track -> Overall track mean."""


class BestCheckpoint(_Record):
    """`checkpoints/best.json`: the retained theta* and the scores it was promoted with."""

    schema_version: int = ROUTING_SCHEMA_VERSION
    round: int
    checkpoint: str
    checkpoint_digest: str
    score: float
    """Controller Overall of the retained checkpoint (the `score` field of `bat.state.checkpoints.write_best`)."""
    scores: ScoreSnapshot
    history: list[dict[str, int | str | float]] = Field(default_factory=list)
    """Every promotion so far: round, checkpoint, overall."""


class RouteDecision(_Record):
    """`round_NN/route/decision.json`: inputs (aggregates only), rule fired, target stage, mixture, start checkpoint."""

    schema_version: int = ROUTING_SCHEMA_VERSION
    round: int
    arm: str
    action: Action
    reason: str
    rule: str
    """Router rule that picked the target: `lowest`, `largest_regression`, `single_pool`, `none`."""
    target_stage: str | None
    mixture: dict[str, int]
    """Pool -> rows per batch for the next round."""
    start_checkpoint: str | None
    best_checkpoint: str | None
    candidate: ScoreSnapshot | None
    best_before: ScoreSnapshot | None
    previous_overall: float | None
    drop_counter: int
    kl: float | None
    gate: GateResult | None
    domain_shift: DomainShift | None
    shift_response: str | None = None
    """What the detected domain shift changes in the next round (`curriculum.shift_response`), None when none."""
    health: TrainingHealth | None
    next_round: int | None
    """Round the plan was written for; None when the run stops here."""


class PlanRow(_Record):
    state_id: str
    pool: Pool
    stage: str


class RoundPlan(_Record):
    """`round_NN/plan.json`: what round NN trains on and where it starts."""

    schema_version: int = ROUTING_SCHEMA_VERSION
    round: int
    arm: str
    target_stage: str | None
    mixture: dict[str, int]
    reward_mode: Literal["rubric", "final"]
    """`final` = single final reward on E2E rows (grpo arm); `rubric` = stage rubric rewards."""
    bank_version: int | None
    start_checkpoint: str
    seed: int
    batches: list[list[PlanRow]]
    excluded_state_ids: int = 0
    """Rows held back from training as KL probe prompts."""
    passes: dict[str, int] = Field(default_factory=dict)
    """Pool -> how many permutations were drawn (1 = pure without-replacement)."""
    focus_tracks: dict[str, list[str]] = Field(default_factory=dict)
    """Pools whose rows were drawn from the shifted tracks only (a domain-shift response), with those tracks."""
