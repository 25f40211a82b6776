"""Rollout and reward records written by the rollout and verify phases and read by GRPO.

`RolloutRecord` is token in / token out: `token_ids` is the exact sequence the policy saw and produced
(never re-rendered through the chat template); `loss_mask` is 1 on generated tokens and 0 on prompt,
template and observation tokens; `behavior_logprobs` is aligned with `token_ids` (0.0 where the mask
is 0) and holds log pi_behavior of each generated token under the sampling temperature.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from bat.schemas.base import Record

ROLLOUT_SCHEMA_VERSION = 1
REWARD_SCHEMA_VERSION = 1

END_REASONS = (
    "done",
    "no_tool_call",
    "max_turns",
    "max_tool_calls",
    "max_response_tokens",
    "max_observation_chars",
    "context_length",
    "stage_exit",
    "error",
)
EndReason = Literal[
    "done",
    "no_tool_call",
    "max_turns",
    "max_tool_calls",
    "max_response_tokens",
    "max_observation_chars",
    "context_length",
    "stage_exit",
    "error",
]
"""Why a rollout ended: `done` = the environment said so; `no_tool_call` = an assistant turn without a
tool call (final answer); `stage_exit` = a stage row whose reward nothing that follows could change any more
(`rollout.stage_exit`, `bat.benchmark.settled`); `error` = infrastructure failure (the rollout is then invalid);
the rest are budgets."""

SegmentKind = Literal["prompt", "generated", "template", "observation"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Segment(_Record):
    """A contiguous span `[start, end)` of `token_ids` and where it came from."""

    kind: SegmentKind
    start: int = Field(ge=0)
    end: int = Field(ge=0)


class TurnRecord(_Record):
    """One assistant turn: the response text, the action taken and the observation returned."""

    index: int = Field(ge=0)
    response_text: str
    """Decoded text of this turn's generated tokens (including the end-of-turn token if produced)."""
    generated_tokens: int = Field(ge=0)
    finish: Literal["stop", "length"]
    """`stop` = the policy ended the turn itself; `length` = cut by a token budget."""
    call: dict[str, Any] | None = None
    """The parsed `{"name", "arguments"}` sent to the environment, if the turn held a valid call."""
    invalid: dict[str, Any] | None = None
    """The invalid-action record (`{"invalid": True, "reason", ...}`) if the call was malformed."""
    observation: str | None = None
    """Observation text as shown to the policy (after the per-result character cap)."""
    observation_chars: int = 0
    """Length of the environment's observation before the cap."""
    observation_truncated: bool = False
    record: dict[str, Any] | None = None
    """The environment's execution record for this call (volatile timing fields removed)."""
    files_written: dict[str, str] = Field(default_factory=dict)
    """Workspace-relative path -> sha256 of every file this call created or changed (rollout-side diff)."""
    files_deleted: list[str] = Field(default_factory=list)
    env_done: bool = False


class RolloutRecord(Record):
    """One multi-turn rollout of one Stage Bank state (GRPO group key: `state_id`)."""

    SCHEMA_VERSION: ClassVar[int] = ROLLOUT_SCHEMA_VERSION
    rollout_id: str
    state_id: str
    round: int = Field(ge=0)
    shard: int = Field(ge=0)
    k: int = Field(ge=0)
    """Index of this rollout within its state's group (0..K-1)."""
    pool: str
    """Pool the state was drawn from (`S-target`, `S-mix`, `E2E`)."""
    stage: str
    """Stage key of the row (one of the benchmark's `stages`, or `E2E`)."""
    seed: int
    engine: str
    checkpoint: str
    """Identity of the weights that generated the rollout (path or served model id)."""
    temperature: float
    token_ids: list[int]
    loss_mask: list[int]
    behavior_logprobs: list[float]
    prompt_len: int = Field(ge=0)
    segments: list[Segment]
    turns: list[TurnRecord]
    tool_calls: int = Field(ge=0)
    response_tokens: int = Field(ge=0)
    end_reason: EndReason
    initial_files: dict[str, str] = Field(default_factory=dict)
    """Workspace-relative path -> sha256 of every file right after `env.reset()` (the verifier's trust base)."""
    evidence_dir: str | None = None
    """Final workspace of the rollout, relative to the shard directory."""
    valid: bool = True
    invalid_reason: str | None = None

    @model_validator(mode="after")
    def _aligned(self) -> RolloutRecord:
        n = len(self.token_ids)
        if len(self.loss_mask) != n or len(self.behavior_logprobs) != n:
            raise ValueError(
                f"token_ids ({n}), loss_mask ({len(self.loss_mask)}) and behavior_logprobs "
                f"({len(self.behavior_logprobs)}) must have equal length"
            )
        if any(m not in (0, 1) for m in self.loss_mask):
            raise ValueError("loss_mask values must be 0 or 1")
        if self.prompt_len > n or any(self.loss_mask[: self.prompt_len]):
            raise ValueError("prompt tokens must exist and carry loss_mask 0")
        if self.valid == (self.invalid_reason is not None):
            raise ValueError("invalid_reason is required exactly when valid is False")
        return self

    @property
    def generated_ids(self) -> list[int]:
        """Token ids with loss_mask 1 (the policy's own tokens), in order."""
        return [t for t, m in zip(self.token_ids, self.loss_mask) if m]


class ItemVerdict(_Record):
    """One binary rubric item decision; `None` = could not be decided (infrastructure/judge failure)."""

    item_id: str
    verdict: bool | None
    source: Literal["grader", "judge", "proxy"]
    """`grader` = the benchmark's deterministic check, `judge` = LLM judge, `proxy` = documented fallback."""
    detail: str = ""


class RewardRecord(Record):
    """The verifier's reward for one rollout: r = eta * mean(v) (stage rows) or the E2E mix."""

    SCHEMA_VERSION: ClassVar[int] = REWARD_SCHEMA_VERSION
    rollout_id: str
    state_id: str
    round: int = Field(ge=0)
    pool: str
    stage: str
    items: list[ItemVerdict]
    evidence: dict[str, bool] = Field(default_factory=dict)
    """Evidence requirement id -> confirmed by an execution record."""
    eta: float | None = Field(default=None, ge=0.0, le=1.0)
    stage_scores: dict[str, float | None] = Field(default_factory=dict)
    """E2E rows: per-stage rewards; stage rows: `{stage: reward}`."""
    task_score: float | None = None
    """E2E rows: task score from the grader side (never from agent-written files)."""
    breach: bool = False
    dropped_files: list[str] = Field(default_factory=list)
    """Evidence files left out of grading: not produced by reset or a recorded tool call, edited since, or
    tool-owned paths written by another tool."""
    reward: float | None
    valid: bool
    invalid_reason: str | None = None
    reward_version: str
    judge: str
    """Judge identity (`model@endpoint`) or `none` when every item was decided without a judge."""

    @model_validator(mode="after")
    def _consistent(self) -> RewardRecord:
        if self.valid and self.reward is None:
            raise ValueError("a valid reward record needs a reward")
        if not self.valid and not self.invalid_reason:
            raise ValueError("an invalid reward record needs invalid_reason")
        return self
