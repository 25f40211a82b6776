"""Stage Bank record types: teacher trajectories, SFT rows (Eq. 9), RL rows z = (p, s, c, G, kappa, m), manifest.

RL rows (`BankRow`) never carry an assistant completion, answer or transcript: their `prompt` holds only
system/user messages (stage skill, task brief, a hand-off note built from upstream observations).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_serializer, model_validator

from bat.schemas.base import Record

Outcome = Literal["success", "recovery", "failure"]
OUTCOMES: tuple[str, ...] = ("success", "recovery", "failure")
Split = Literal["train", "validation"]
RewardSource = Literal["stage_rubric", "e2e_rubric_task"]
REWARD_SOURCES: tuple[str, ...] = ("stage_rubric", "e2e_rubric_task")
E2E = "E2E"
_ID = r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$"


class _Record(BaseModel):
    """Nested part of a record: strict and immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class _Top(Record):
    """Top-level record: strict, immutable, `schema_version` checked on read."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ChatMessage(_Record):
    """One chat message as the policy's chat template renders it."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str
    name: str | None = None
    """Tool name on `tool` messages (the call the observation answers)."""


class Reduction(_Record):
    """E2E reduction lambda = (lambda_case, lambda_input, lambda_validate) from a versioned grid (Eq. 12)."""

    grid_version: str
    cases: int = Field(ge=1)
    """Cases kept from the task (lambda_case)."""
    input_fraction: float = Field(gt=0.0, le=1.0)
    """Each input capped at this fraction of its source size (lambda_input)."""
    validate_passes: int = Field(ge=1)
    """At most this many validation (pilot) passes (lambda_validate)."""


class TaskParams(_Record):
    """Explicit instance parameters of a task written by the LLM task writer (`bat.bank.task_writer`)."""

    modality: str
    """Modality of the cases and of the fitting model card."""
    pitfalls: tuple[str, ...] = ()
    """Pitfalls that are on (the benchmark's pitfall names); the others are off."""
    distractors: tuple[str, ...] = ()
    """Modalities of the other candidate model cards."""
    cases: int = Field(ge=1)
    """Cases of the instance (an E2E reduction keeps fewer)."""


class PracticeTask(_Top):
    """A fictional task from the benchmark's practice seed space (never a held-out instance)."""

    task_id: str = Field(pattern=_ID)
    track: str
    seed: int = Field(ge=0)
    """Practice-space seed the benchmark rebuilds the instance (and its grader side) from."""
    variant: str
    """Teacher variant the task is run with (expert / recovery / failure)."""
    reduction: Reduction | None = None
    """Set for E2E surrogates: the instance is R_lambda(task)."""
    slot: int = Field(0, ge=0)
    """Slot of (track, outcome) this task fills."""
    attempt: int = Field(0, ge=0)
    """0 for the planned task; k > 0 for the k-th replacement after a trajectory failed its check."""
    params: TaskParams | None = None
    """Set for a task the LLM task writer wrote: the instance is built from the seed with these parameters.
    None (a scripted task) is left out of the serialised record, so scripted banks keep their bytes."""

    @model_serializer(mode="wrap")
    def _omit_unwritten(self, handler: Any) -> dict[str, Any]:
        data = handler(self)
        if self.params is None:
            data.pop("params", None)
        return data


class TrajectoryTurn(_Record):
    """(a_t, o_t, s_t) of Eq. 8: one teacher response, the observation after it, the public stage."""

    t: int = Field(ge=0)
    stage: str
    response: str
    """The full assistant text (reasoning + `<tool_call>{...}</tool_call>`)."""
    call: dict[str, Any] | None
    """The parsed tool call `{"name", "arguments"}` or None when the response was not a valid call."""
    observation: str
    record: dict[str, Any] = Field(default_factory=dict)
    """The environment's execution record for this step (tool, exit status, files changed, ...)."""
    done: bool = False


class Trajectory(_Top):
    """A checked multi-turn teacher trajectory over one practice task."""

    trajectory_id: str = Field(pattern=_ID)
    task: PracticeTask
    outcome: Outcome
    teacher: str
    """`scripted:<variant>` or `llm:<model>`."""
    brief: str
    """The first observation (task brief) returned by the environment's reset()."""
    turns: list[TrajectoryTurn]
    stage_scores: dict[str, float | None]
    task_score: float | None
    overall: float | None
    checked: bool
    """True when the run passed the trajectory checks (label matches verdicts, no breach, fits H)."""
    check_failures: list[str] = Field(default_factory=list)


class LossMaskSpec(_Record):
    """Loss only on the target: every token of `messages` is masked, the rendered target is trained."""

    kind: Literal["target_only"] = "target_only"
    context_messages: int = Field(ge=1)
    """Number of context messages before the target (all masked)."""


class SftRow(_Top):
    """(h_t, a_t) of Eq. 9: context in chat form + exactly one teacher response as target."""

    row_id: str = Field(pattern=_ID)
    trajectory_id: str
    task_id: str
    track: str
    stage: str
    """Stage of the target turn, or `E2E` for rows sliced from an E2E surrogate trajectory."""
    outcome: Outcome
    turn: int = Field(ge=0)
    messages: list[ChatMessage]
    target: str
    loss_mask: LossMaskSpec
    length: int = Field(ge=1)
    """Length of context + target in `length_unit`."""
    length_unit: Literal["tokens", "approx_tokens"]
    split: Split

    @model_validator(mode="after")
    def _mask_matches(self) -> SftRow:
        if self.loss_mask.context_messages != len(self.messages):
            raise ValueError(
                f"loss_mask.context_messages={self.loss_mask.context_messages} but {len(self.messages)} messages"
            )
        return self


class RubricItemRef(_Record):
    """One rubric item c_l of the row's stage (ids from the benchmark's rubric contract)."""

    id: str
    stage: str
    text: str = ""


class EvidenceRef(_Record):
    """One evidence requirement of G (what must be confirmed from records/artifacts)."""

    id: str
    stage: str
    text: str = ""


class StateRef(_Record):
    """p: the row's state package, relative to the bank version directory."""

    path: str
    """e.g. `states/<state_id>`; never absolute."""
    digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    files: int = Field(ge=0)
    bytes: int = Field(ge=0)

    @field_validator("path")
    @classmethod
    def _relative(cls, value: str) -> str:
        if value.startswith("/") or ".." in value.split("/"):
            raise ValueError(f"state path must be relative inside the bank version, got {value!r}")
        return value


class Provenance(_Record):
    """m: where the row came from (no transcript content)."""

    source: str
    """`practice:<track>` — the benchmark's practice seed space."""
    generator: str
    generator_version: str
    teacher: str
    seeds: dict[str, int]
    reduction: Reduction | None = None
    trajectory_id: str
    prefix_turns: int = Field(ge=0)
    """Teacher turns replayed (Eq. 11) before the state was packed."""
    digests: dict[str, str] = Field(default_factory=dict)


class BankRow(_Top):
    """z = (p, s, c, G, kappa, m) plus the index keys; `state_id` is the GRPO group key."""

    state_id: str = Field(pattern=_ID)
    stage: str
    """s: a stage key of the benchmark (`stages`; the built-in S1..S5) or `E2E`."""
    track: str
    outcome: Outcome
    reward_source: RewardSource
    task: PracticeTask
    state: StateRef
    prompt: list[ChatMessage]
    """System (agent preamble + skill) and user (brief + hand-off note) messages only."""
    rubric: list[RubricItemRef]
    evidence: list[EvidenceRef]
    skill: str
    """kappa: the stage skill (ordered skills of every stage for E2E)."""
    provenance: Provenance

    @field_validator("prompt")
    @classmethod
    def _no_completions(cls, value: list[ChatMessage]) -> list[ChatMessage]:
        bad = [m.role for m in value if m.role not in ("system", "user")]
        if bad:
            raise ValueError(f"RL rows carry no assistant/tool transcript; prompt roles must be system|user, got {bad}")
        return value


class BankIndex(_Top):
    """State ids keyed by track / stage / outcome / reward_source (pools are views of it)."""

    by_track: dict[str, list[str]]
    by_stage: dict[str, list[str]]
    by_outcome: dict[str, list[str]]
    by_reward_source: dict[str, list[str]]


class BankManifest(_Top):
    """MANIFEST.json of a bank version: counts, digests, generator versions, seeds."""

    version: int = Field(ge=1)
    fingerprint: str
    """Digest of (generator version, resolved bank config, seed): equal fingerprints, equal content."""
    generator_versions: dict[str, str]
    seeds: dict[str, int]
    reduction_grid: str
    stages: list[str]
    tracks: list[str]
    counts: dict[str, Any]
    """`rl`: {stage: {track: {outcome: n}}}, `sft`: {split: n, by_stage: ...}, `rejected`, totals."""
    digests: dict[str, str]
    """sha256 of every file in the version (relative path -> `sha256:<hex>`), MANIFEST.json excluded."""
    config: dict[str, Any]
