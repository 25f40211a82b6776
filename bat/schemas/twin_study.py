"""Records of an arm-versus-twin study (`bat.experiment.twin_analysis`): one unit per arm x seed (or the reference
checkpoint) holding only numbers, and the criteria computed from them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class E2eRun(_Record):
    """One held-out E2E run's outcome (numbers only)."""

    finished: bool
    """The run ended by the agent's submission (`end_reason == done`)."""
    overall: float | None = None
    """Overall 0-1 (None: a null run)."""


class TwinUnit(_Record):
    """One arm x seed of the study, or the reference checkpoint (`arm` = its name, no rewards)."""

    schema_version: int = 1
    arm: str
    seed: int
    commit: str = ""
    date: str = ""
    cpu: str = ""
    rewards: list[float] = Field(default_factory=list)
    """Mean true reward of each training step's rollouts, step 1 first."""
    probe: dict[int, list[float | None]] = Field(default_factory=dict)
    """Training step -> each held-out probe state's mean reward (0-1) in the probe's state order."""
    probe_digest: str = ""
    e2e: dict[str, E2eRun] = Field(default_factory=dict)
    """Held-out E2E run id -> outcome (the same run ids for every checkpoint of the study)."""


class Criterion(_Record):
    """One pre-registered criterion as measured."""

    name: str
    rule: str
    value: float | None
    interval: tuple[float, float] | None = None
    p: float | None = None
    passed: bool | None
    """None: not decided (a unit it needs is missing)."""
    detail: dict[str, float | int | str | None] = Field(default_factory=dict)


class TwinResults(_Record):
    """The study's outcome: every criterion, and which units were missing."""

    schema_version: int = 1
    arm: str
    twin: str
    seeds: list[int]
    complete: bool
    missing: list[str] = Field(default_factory=list)
    criteria: list[Criterion] = Field(default_factory=list)
    overall: dict[str, float | None] = Field(default_factory=dict)
    """Mean held-out E2E Overall (0-100) per arm, twin and reference."""
