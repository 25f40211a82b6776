"""Records of the arm experiment (`bat.experiment`) as it writes them: an arm x seed's record and open attempt, the
shared bootstrap's record, the collected result of one arm x seed (also its committed piece), the wide final
evaluation's record (arms, suite anchors, null control) and the null control's calibration.

Every field keeps the JSON key it has on disk, so committed records load as they are. A key a record does not hold
stays absent when it is written back (`ExperimentRecord.to_json` leaves unset fields out): records written before a
field existed round-trip byte for byte. Counts read back from DONE.json may be ints or floats (`Count`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from bat.schemas.evaluation import EvalAggregate

Count = int | float
"""A number read back from a DONE.json count (JSON may hold `4` or `4.0`; kept as it came)."""
PIECE_SCHEMA = 1
"""Version of a committed piece's layout (`piece_schema`)."""


class ExperimentRecord(BaseModel):
    """Base of the experiment's records: unknown keys refused; `to_json` writes only the keys the record holds."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def to_json(self) -> dict[str, Any]:
        """The record as JSON data, without the fields that were never set (absent keys stay absent)."""
        return self.model_dump(mode="json", exclude_unset=True, by_alias=True)


class CpuFacts(ExperimentRecord):
    """The CPU a record was made on (`bat.perf.machine.cpu_facts`)."""

    model: str = "?"
    flags: list[str] = Field(default_factory=list)
    """ISA flags (sorted): the axis on which fp32 results differ."""
    cores: int = 0
    machine: str = ""


class PieceStamp(ExperimentRecord):
    """What every committed record carries (`bat.experiment.pieces.stamp_piece`): layout version, the commit that
    produced it, the CPU, the UTC time."""

    piece_schema: int | None = None
    commit: str | None = None
    cpu: CpuFacts | None = None
    recorded_at: str | None = None


class ArmRecord(ExperimentRecord):
    """`<arm state>/experiment_arm.json`: one arm x seed's run, written when it ends (`bat.experiment.execute`)."""

    arm: str
    kind: str
    seed: int
    overrides: list[str] = Field(default_factory=list)
    shared_sft_digest: str | None = None
    shared_wall_s: float | None = None
    attempts: int = 0
    """Attempts so far, this one and those stopped from outside included."""
    interrupted_attempts: int = 0
    config_hash: str | None = None
    final_round: int | None = None
    """The last routed round (whose retained best the end-of-run evaluation scored)."""
    status: str = "not run"
    """`done` or `failed`."""
    error: str | None = None
    traceback: str | None = None
    wall_s: float = 0.0


class AttemptRecord(ExperimentRecord):
    """`<arm state>/experiment_attempt.json`: an open attempt (running now, or stopped from outside)."""

    started_at: float
    """Epoch seconds."""
    stopped_attempts: int = 0
    """Earlier attempts stopped from outside, not yet counted in a record."""
    stopped_wall_s: float = 0.0


class SeedMarker(ExperimentRecord):
    """`<arm state>/experiment_seed.json`: the arm state dir was seeded from a shared bootstrap."""

    shared: str
    seed: int
    sft_digest: str
    models_only: bool
    copied: list[str]


class SharedRecord(PieceStamp):
    """The shared bootstrap's record: `<shared state>/experiment_shared.json`, and its committed piece."""

    seed: int
    wall_s: float
    sft_checkpoint: str | None = None
    sft_digest: str
    source: str | None = None
    """`committed` when read from a committed piece."""


class PoolSignal(ExperimentRecord):
    """One pool's training signal in an RL round (`bat.verify.signal.pool_signal`)."""

    rewards: int
    reward_mean: float | None
    groups: int
    groups_identical: int


class GroupRewards(ExperimentRecord):
    """One GRPO group (state) of an RL round: pool, bank state outcome and its valid rewards."""

    state_id: str
    pool: str
    outcome: str
    rewards: list[float]


class RoundSignal(ExperimentRecord):
    """An RL round's training signal: mean reward, GRPO groups (all, identical rewards), the last step's gradient
    norm and uncancelled advantage share, the route's action and KL, per-pool and per-group rewards."""

    round: int
    reward_mean: float | None = None
    rewards: Count | None = None
    by_pool: dict[str, PoolSignal] = Field(default_factory=dict)
    groups: Count | None = None
    groups_identical: Count | None = None
    grad_norm: float | None = None
    adv_uncancelled: float | None = None
    route: str | None = None
    kl: float | None = None
    group_rewards: list[GroupRewards] | None = None


class Curve(ExperimentRecord):
    """Per round with a controller evaluation: raw Overall, the retained best's score after it, stage scores."""

    rounds: list[int] = Field(default_factory=list)
    raw: list[float | None] = Field(default_factory=list)
    best: list[float | None] = Field(default_factory=list)
    stages: list[dict[str, float | None]] = Field(default_factory=list)


class Supersession(ExperimentRecord):
    """Why and when a committed arm x seed was set aside (`superseded`)."""

    tag: str
    reason: str
    by_commit: str
    at: str


class Amendment(ExperimentRecord):
    """A hand correction of a committed record: when, which fields, from what."""

    at: str
    fields: str
    from_: str = Field(alias="from")


class RunCounts(ExperimentRecord):
    """What an arm's own phases did (copied round-0 phases excluded): rollouts, GRPO steps, generated tokens, the
    runner's compute seconds, the training signal per RL round, RL rounds and plan rows (all, distinct)."""

    rollouts: int = 0
    grpo_steps: int = 0
    generated_tokens: int = 0
    compute_s: float = 0.0
    signal: list[RoundSignal] = Field(default_factory=list)
    rl_rounds: int = 0
    plan_rows: int = 0
    plan_unique_rows: int = 0


class SeedRun(PieceStamp, RunCounts):
    """One arm x seed as collected (`bat.experiment.collect.seed_result`), and its committed piece: status, counts
    (`RunCounts`), curve, end-of-run aggregates, provenance. Fields other than `seed` are present only where the
    run got that far (a run not started has status and counts of attempts only)."""

    arm: str | None = None
    seed: int
    source: str | None = None
    """`state` (this disk's state dir) or `committed` (a committed piece)."""
    status: str | None = None
    """`done`, `failed`, `not run`, `unfinished` (an attempt open) or `stale` (other budget fields)."""
    error: str | None = None
    wall_s: float | None = None
    attempts: int = 0
    interrupted_attempts: int = 0
    shared_sft_digest: str | None = None
    sft_digest: str | None = None
    """Older records: the bootstrap's SFT digest under this name."""
    attempt_started_at: str | None = None
    heldout_suite: str | None = None
    """The held-out suite's public fingerprint: arms pair run by run only within one suite."""
    budget: dict[str, Any] | None = None
    """The matched-budget fields (`bat.experiment.spec.budget_signature`) the run ran under; None when unknown."""
    curve: Curve | None = None
    round0_eval_digest: str | None = None
    round1_start_digest: str | None = None
    final_round: int | None = None
    aggregates: dict[str, EvalAggregate] = Field(default_factory=dict)
    """End-of-run split -> its aggregate."""
    aggregate: EvalAggregate | None = None
    """The report split's end-of-run aggregate."""
    stale_fields: dict[str, list[Any]] | None = None
    """Budget field -> [ran under, expected], for a `stale` run."""
    superseded: Supersession | None = None
    amended: Amendment | None = None

    @property
    def done(self) -> bool:
        """True for a finished run that enters the means."""
        return self.status == "done"


class WideRun(ExperimentRecord):
    """One held-out run of a wide final evaluation: its instance, track and scores."""

    instance_id: str
    track: str | None = None
    overall: float | None
    task: float | None = None
    agentic: float | None = None


class ScaleTry(ExperimentRecord):
    """One scale the null control tried and the KL it measured."""

    scale: float
    kl: float


class NullCalibration(ExperimentRecord):
    """`checkpoints/null/null.json` of a null seed's state dir: every scale tried; the chosen one once found."""

    target_kl: float
    tried: list[ScaleTry] = Field(default_factory=list)
    scale: float | None = None
    kl: float | None = None
    checkpoint: str | None = None


class NullInfo(ExperimentRecord):
    """The null control's calibration as its wide record carries it."""

    start_digest: str
    direction: str
    target_kl: float
    scale: float
    kl: float
    tried: list[ScaleTry]


class WideRecord(PieceStamp):
    """`<out>/wide/<arm>/seed_<s>_rNN.json` (and `wide/_anchor/suite_<fp>_rNN.json`): one checkpoint scored on
    `repeats` final runs per track; run id -> scores. `reused_from` names the arm x seed whose identical checkpoint
    scored the runs; `null` is set for the null control."""

    arm: str
    seed: int
    repeats: int
    end_of_run_repeats: int | None = None
    final_round: int | None = None
    checkpoint_digest: str
    heldout_suite: str | None = None
    overall: float | None
    n_runs: int
    reused_runs: int | None = None
    reused_from: str | None = None
    wall_s: float
    null: NullInfo | None = None
    runs: dict[str, WideRun]

    def run_scores(self) -> dict[str, tuple[str, float | None]]:
        """run id -> (instance, Overall): what `bat.experiment.power` pairs."""
        return {rid: (run.instance_id, run.overall) for rid, run in self.runs.items()}


class TrainingStep(BaseModel):
    """The fields the experiment and the lr probe read from one line of a training phase's `metrics.jsonl` (one line
    per optimizer step, written by `bat.train`; the line's other fields are kept as they are)."""

    model_config = ConfigDict(extra="allow")

    step: int
    lr: float | None = None
    grad_norm: float | None = None
    """Before clipping."""
    adv_uncancelled: float | None = None
    """GRPO: the share of the step's advantage weight that does not cancel within groups."""
