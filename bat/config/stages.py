"""The ordered stage list of the staged benchmark (S1..S5 by default, CONTRACTS.md)."""

from __future__ import annotations

from pydantic import Field

from bat.config.base import Section


class StageSpec(Section):
    key: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_]*$")
    """Stage key used in rows, rubrics and reports (e.g. `S1`)."""
    name: str
    """Human-readable stage name (e.g. `Plan`)."""
    weight: float = Field(gt=0.0, le=1.0)
    """Weight of the stage in the Agentic score; weights must sum to 1."""


DEFAULT_STAGES = (
    StageSpec(key="S1", name="Plan", weight=0.25),
    StageSpec(key="S2", name="Setup", weight=0.15),
    StageSpec(key="S3", name="Validate", weight=0.35),
    StageSpec(key="S4", name="Inference", weight=0.15),
    StageSpec(key="S5", name="Submit", weight=0.10),
)
