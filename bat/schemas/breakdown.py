"""Failure-breakdown records: what each turn of a run did wrong, where each run stalled, and their counts.

`RunBreakdown` (per run) and `Transcript` (per run, the turns themselves) stay where the run's content may live:
the held-out side for evaluations, the shard for rollouts. `FailureSummary` holds counts only and may cross to
the training side inside an evaluation aggregate.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from bat.schemas.rollout import TurnRecord

BREAKDOWN_SCHEMA_VERSION = 1

TURN_KINDS = (
    "ok",
    "malformed",
    "unknown_tool",
    "invalid_arguments",
    "unseen_name",
    "repeat",
    "too_early",
    "tool_error",
    "no_call",
)
"""Primary kind of one turn, first match wins in this order of checks: `malformed` (a response that is not
exactly one well-formed call; its parser reason is kept as `detail`), `unknown_tool`, `invalid_arguments` (the
environment rejected the arguments), `unseen_name` (a path, model, package or case id that occurs nowhere in the
prompt or an earlier observation: a copy failure), `repeat` (the same call with the same answer as an earlier turn,
nothing changed in between), `too_early` (a
stage tool called more than one stage past the furthest stage reached), `tool_error` (any other failed call),
`no_call` (a final turn that ended the run without a call), `ok`."""

FINISHED = "finished"
"""`stalled` value of a run whose submit succeeded."""
STAGE_DONE = "stage_done"
"""`stalled` value of a stage row ended at its stage exit (end reason `stage_exit`): its reward was settled."""


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TurnVerdict(_Record):
    """One turn's classification."""

    index: int = Field(ge=0)
    kind: str
    """One of `TURN_KINDS`."""
    detail: str = ""
    """Parser reason for `malformed` (e.g. `bad_json`), the unseen value for `unseen_name`, the error otherwise."""
    tool: str | None = None
    stage: str | None = None


class RunBreakdown(_Record):
    """Per-run breakdown: end reason, the stage it stalled at, and a verdict per turn."""

    schema_version: int = BREAKDOWN_SCHEMA_VERSION
    run_id: str
    track: str = ""
    end_reason: str
    stalled: str
    """First stage the run never completed a stage call of, or `finished` (submit succeeded)."""
    turns: list[TurnVerdict] = Field(default_factory=list)
    first_failure: int | None = None
    """Index of the first turn that was not `ok`."""


class Transcript(_Record):
    """Everything the agent saw and did in one run: opening messages, then per turn the generated text, the parsed
    call or parse error, the observation and the stage tag (an evaluation keeps it on the held-out side)."""

    schema_version: int = BREAKDOWN_SCHEMA_VERSION
    run_id: str
    track: str = ""
    end_reason: str
    opening: list[dict[str, Any]] = Field(default_factory=list)
    """The opening system/user messages (`role`, `content`)."""
    turns: list[TurnRecord] = Field(default_factory=list)
    breakdown: RunBreakdown | None = None


class FailureSummary(_Record):
    """Counts over the runs of one evaluation or shard: numbers only, no content."""

    schema_version: int = BREAKDOWN_SCHEMA_VERSION
    runs: int = 0
    turns: int = 0
    end_reasons: dict[str, int] = Field(default_factory=dict)
    """End reason -> runs."""
    stalled: dict[str, int] = Field(default_factory=dict)
    """Stage (or `finished`) -> runs that stalled there."""
    turn_kinds: dict[str, int] = Field(default_factory=dict)
    """Turn kind -> turns of that kind (malformed split as `malformed:<reason>`)."""
    runs_with: dict[str, int] = Field(default_factory=dict)
    """Turn kind -> runs with at least one turn of that kind."""
    first_failures: dict[str, int] = Field(default_factory=dict)
    """Turn kind -> runs whose first non-ok turn was of that kind."""


class ShardBreakdown(_Record):
    """A rollout shard's `breakdown.json`: the counts and every rollout's verdicts (training-side content)."""

    schema_version: int = BREAKDOWN_SCHEMA_VERSION
    summary: FailureSummary
    runs: list[RunBreakdown] = Field(default_factory=list)
