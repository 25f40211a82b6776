"""`RunScore`: the per-run result record of the staged benchmark (every item verdict kept)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class RunScore(BaseModel):
    """One graded run. Scores are 0-1 and unrounded; None = infrastructure-null (never averaged as 0)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    run_id: str = ""
    track: str
    instance_id: str
    repeat: int = 0
    stages: dict[str, float | None]
    """Stage key -> score; a not-applicable stage is absent (listed in `not_applicable`)."""
    not_applicable: list[str] = Field(default_factory=list)
    items: dict[str, dict[str, bool | None]]
    """Stage key -> item id -> verdict (None = null evidence, e.g. judge unavailable)."""
    evidence: dict[str, dict[str, bool]] = Field(default_factory=dict)
    """Stage key -> evidence id -> confirmed."""
    eta: dict[str, float] = Field(default_factory=dict)
    """Stage key -> evidence completeness in [0, 1]."""
    measures: dict[str, float] = Field(default_factory=dict)
    """Continuous measures used by stage formulas (e.g. completion_rate)."""
    task: float | None
    task_metrics: dict[str, float] = Field(default_factory=dict)
    agentic: float | None
    overall: float | None
    breach: bool = False
    breach_reasons: list[str] = Field(default_factory=list)
    valid: bool = True
    """False when some cell is null (reported and repaired, never aggregated silently)."""
    null_reasons: list[str] = Field(default_factory=list)
    judge: str = "proxy"
    """Who decided judgment items: `proxy` (documented deterministic rule) or the judge's identity."""
    details: dict[str, Any] = Field(default_factory=dict)
