"""Records of the held-out stage probe: its expert trajectories and states (held-out side only) and the per-stage
aggregate of one scored checkpoint (the only probe record that leaves the held-out side).

Probe states are built from held-out instances of the probe's own split, never from practice tasks, so they are
not `BankRow`s: a `ProbeState` carries what a stage row carries for a rollout (state package, opening prompt,
rubric c, evidence G, skill kappa) plus the held-out instance it came from.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from bat.schemas.bank import ChatMessage, EvidenceRef, RubricItemRef, StateRef, TrajectoryTurn
from bat.schemas.base import Record


class _Top(Record):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ProbeTrajectory(_Top):
    """The built-in expert's run through one probe instance (held-out side only)."""

    trajectory_id: str
    run_id: str
    """The probe run `stage_probe-<track>-rNN` the instance belongs to."""
    track: str
    instance_id: str
    teacher: str
    brief: str
    turns: list[TrajectoryTurn]
    stage_scores: dict[str, float | None]
    task_score: float | None
    checked: bool
    """True when the run is a valid success example (`bat.bank.checks.check_run`); only checked runs give states."""
    check_failures: list[str] = Field(default_factory=list)


class ProbeState(_Top):
    """One probe state: the workspace the expert's prefix leaves at the start of `stage` (held-out side only)."""

    state_id: str
    run_id: str
    track: str
    stage: str
    instance_seed: int
    """The held-out instance's seed (secret-derived): the grader side is rebuilt from it at scoring time."""
    instance_id: str
    trajectory_id: str
    prefix_turns: int = Field(ge=0)
    """Expert turns replayed before the state was packed."""
    state: StateRef
    """The package under `heldout/stage_probe/` (`path` relative to that folder)."""
    prompt: list[ChatMessage]
    """Opening under `rollout.state_context: handoff`: stage skill, brief and hand-off note (as a stage row's)."""
    rubric: list[RubricItemRef]
    evidence: list[EvidenceRef]
    skill: str


class ProbeManifest(_Top):
    """What a probe build made and from what (`heldout/stage_probe/MANIFEST.json`, written last)."""

    digest: str
    """sha256 over the knobs, the secret's fingerprint and every state's id and package digest."""
    secret_fingerprint: str
    suite_version: str
    harness_version: str
    knobs: dict[str, object]
    """heldout_seed, tracks, stages, tasks_per_track, benchmark shape the states depend on."""
    runs: list[str]
    """Probe run ids, in build order."""
    states_by_stage: dict[str, int]
    skipped: dict[str, list[str]] = Field(default_factory=dict)
    """Run id -> why its expert trajectory gave no states (failed its check)."""


class StageProbeCell(BaseModel):
    """One stage's probe score: mean over states of the state's mean reward, 0-100."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mean: float | None
    """0-100; None when no state of the stage had a valid rollout."""
    half_width: float | None
    """t-based half-width at the record's confidence across state means, 0-100 (None with fewer than 2 states)."""
    n_states: int = Field(ge=0)
    """States with at least one valid rollout (the statistical unit)."""
    n_rollouts: int = Field(ge=0)
    """Valid rollouts scored."""
    n_invalid: int = Field(0, ge=0)
    """Rollouts left out: invalid for infrastructure reasons or with a null verdict."""


class StageProbeScore(_Top):
    """The probe's aggregate for one checkpoint (`stage_probe/<label>.json`): numbers only, no held-out content."""

    label: str
    checkpoint: str
    checkpoint_digest: str
    probe_digest: str
    """`ProbeManifest.digest` of the states scored: scores with equal digests were scored on the same states."""
    k: int = Field(ge=1)
    temperature: float
    confidence: float
    config_hash: str
    stages: dict[str, StageProbeCell]
    overall: StageProbeCell
    """Over every probe state, whatever its stage."""
    end_reasons: dict[str, int] = Field(default_factory=dict)
    state_means: list[float | None] = Field(default_factory=list)
    """Each probe state's mean reward (0-1) in the probe's state order: the unit of a paired comparison of two
    checkpoints scored on the same `probe_digest` (numbers only; the states stay on the held-out side)."""
