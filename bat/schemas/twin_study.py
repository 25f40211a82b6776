"""Records of an arm-versus-twin study (`bat.experiment.twin_analysis`): one unit per arm x seed (or the reference
checkpoint) holding only numbers, the committed pieces they are merged from (`TwinPiece`, one per pre-registered
unit), and the criteria computed from them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bat.schemas.evaluation import EvalRun
from bat.schemas.experiment import PieceStamp


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class E2eRun(_Record):
    """One held-out E2E run's outcome (numbers only)."""

    finished: bool
    """The run ended by the agent's submission (`end_reason == done`)."""
    overall: float | None = None
    """Overall 0-1 (None: a null run)."""
    end_reason: str = ""
    """How the run ended (`done`, `no_tool_call`, `max_turns`, ...): the failure breakdown."""


class TwinUnit(_Record):
    """One arm x seed of the study, or the reference checkpoint (`arm` = its name, no rewards)."""

    schema_version: int = 1
    arm: str
    seed: int
    commit: str = ""
    date: str = ""
    cpu: str = ""
    rewards: list[float | None] = Field(default_factory=list)
    """Mean true reward of each training step's rollouts, step 1 first (None: a step without a valid rollout)."""
    probe: dict[int, list[float | None]] = Field(default_factory=dict)
    """Training step -> each held-out probe state's mean reward (0-1) in the probe's state order."""
    probe_digest: str = ""
    e2e: dict[str, E2eRun] = Field(default_factory=dict)
    """Held-out E2E run id -> outcome (the same run ids for every checkpoint of the study)."""


PIECE_PARTS = ("train", "e2e", "reference")
"""What a committed piece holds: `train` an arm x seed's true reward per GRPO step and its held-out probe at the
probed steps, `e2e` its final checkpoint's held-out E2E runs, `reference` the reference checkpoint's (the SFT's) probe
at step 0 and its held-out E2E runs."""


class TwinPiece(PieceStamp):
    """One committed unit of the study (`<study>/units/<arm>/seed_<s>_<part>.json`, `bat.experiment.twin_units`):
    numbers only, stamped with the commit, CPU and time that recorded it; never overwritten."""

    part: Literal["train", "e2e", "reference"]
    arm: str
    seed: int
    sft_digest: str
    """Digest of the shared bootstrap's SFT export the unit started from (or, `reference`, scored)."""
    heldout_suite: str = ""
    """Public fingerprint of the held-out secret the unit met (every unit of a study meets one suite)."""
    rewards: list[float | None] = Field(default_factory=list)
    """`train`: mean true reward of each GRPO step's rollouts, step 1 first (None: a step with no valid rollout)."""
    probe: dict[int, list[float | None]] = Field(default_factory=dict)
    """Training step -> each held-out probe state's mean reward (0-1), in the probe's state order."""
    probe_digest: str = ""
    """The probe's `ProbeManifest.digest` (every probed step of a piece was scored on the same states)."""
    probe_checkpoints: dict[int, str] = Field(default_factory=dict)
    """Training step -> digest of the checkpoint the probe scored."""
    checkpoint_digest: str = ""
    """`e2e` and `reference`: digest of the checkpoint the E2E runs scored; `train`: of the final candidate."""
    weights_digest: str = ""
    """`train`: sha256 of the final candidate's weights file (`model.safetensors`), what a candidate rebuilt from
    the SFT and the kept adapter on another disk must reproduce."""
    adapter_digest: str = ""
    """`train` with LoRA: digest of the candidate's adapter folder, committed beside the piece
    (`units/<arm>/seed_<s>_adapter/`), so the candidate can be rebuilt on another disk from the SFT and it."""
    e2e: dict[str, E2eRun] = Field(default_factory=dict)
    """Held-out E2E run id -> outcome."""


class TwinPartialRuns(PieceStamp):
    """Held-out E2E runs played so far of an unfinished `e2e` or `reference` unit
    (`<study>/units/<arm>/seed_<s>_<part>_partial.json`, `bat.experiment.twin_partial`), committed so the unit's
    evaluation resumes from them on another disk; merged (never shrunk) each time it is kept."""

    part: Literal["e2e", "reference"]
    arm: str
    seed: int
    weights_digest: str
    """sha256 of the played checkpoint's weights file: a resume restores these runs only for the same weights."""
    heldout_suite: str = ""
    """Public fingerprint of the held-out secret the runs met."""
    runs: list[EvalRun] = Field(default_factory=list)
    """The runs finished so far, sorted by run id, each with its held-out instance id left out (`""`): a resume
    fills it in from the suite."""


class UnitSource(_Record):
    """Where one committed piece came from, as `results.json` lists it."""

    piece: str
    """Path of the piece relative to the study folder."""
    part: str
    arm: str
    seed: int
    commit: str
    recorded_at: str
    cpu: str
    """CPU model and its vector-ISA kind (`avx2`, `avx512`, `amx`) with the AVX-512/AMX flags."""
    sft_digest: str


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
    problems: list[str] = Field(default_factory=list)
    """Units that do not fit together (another probe, suite or run set): while any is listed nothing is decided."""
    notes: list[str] = Field(default_factory=list)
    """What is reported beside the criteria (e.g. a rebuilt bootstrap with another SFT digest)."""
    units: list[UnitSource] = Field(default_factory=list)
    """Every committed piece read, with its provenance."""
    descriptives: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Reported without a criterion, per unit (`<arm> seed <s>`): `probe` (step -> mean x 100), `finish` and
    `overall` (held-out E2E, 0-100), `end_reasons` (runs per end reason)."""
