"""The collected results of an arm experiment (`<out>/results.json`, `bat.experiment.collect.collect`): per-arm
summaries across seeds and tracks, paired comparisons with the reference arm, the held-out stage profile before and
after RL, the matched-budget audit, the shared bootstraps, superseded runs and the wide final evaluation's summary.

Keys are those of the file; keys a results file does not hold stay absent when written back
(`ExperimentRecord.to_json`), so results written before a field existed load and round-trip unchanged.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from bat.schemas.experiment import ExperimentRecord, SeedRun, SharedRecord


class ArmSummary(ExperimentRecord):
    """An arm on one end-of-run split, per metric (Overall, Task, Agentic, stage keys): mean of seed-averaged track
    means, t half-width across tracks, seed SD/min/max of seed means, and the seed-averaged track means."""

    n_seeds: int = 0
    mean: dict[str, float | None] = Field(default_factory=dict)
    half_width: dict[str, float | None] = Field(default_factory=dict)
    seed_sd: dict[str, float | None] = Field(default_factory=dict)
    seed_min: dict[str, float] = Field(default_factory=dict)
    seed_max: dict[str, float] = Field(default_factory=dict)
    track_means: dict[str, dict[str, float | None]] = Field(default_factory=dict)
    """Metric -> track -> mean over seeds."""


class Comparison(ExperimentRecord):
    """Paired per-track comparison of two arm summaries (ref - other) on one metric."""

    metric: str
    deltas: dict[str, float] = Field(default_factory=dict)
    mean_delta: float
    half_width: float | None
    p_value: float | None
    n_tracks: int


class ArmResult(ExperimentRecord):
    """One arm: its kind, whether it has RL rounds, its overrides, every seed's run, summaries per split."""

    kind: str
    rl: bool = False
    overrides: list[str] = Field(default_factory=list)
    seeds: list[SeedRun] = Field(default_factory=list)
    summary: ArmSummary = Field(default_factory=ArmSummary)
    """On the report split."""
    summaries: dict[str, ArmSummary] = Field(default_factory=dict)
    """End-of-run split -> summary (splits with at least one finished seed)."""
    wall_s_mean: float | None = None
    failed: list[int] = Field(default_factory=list)

    def done_seeds(self) -> list[SeedRun]:
        """The seeds that enter a mean (status `done`)."""
        return [s for s in self.seeds if s.done]


class StageChange(ExperimentRecord):
    """One stage before RL (the SFT arm) and after (an RL arm's retained best), with the paired change."""

    before: float | None
    after: float | None
    change: Comparison | None


class HeldOutProfile(ExperimentRecord):
    """Per end-of-run split, RL arm and stage: before -> after RL (`before` names the arm without RL rounds)."""

    before: str
    splits: dict[str, dict[str, dict[str, StageChange]]] = Field(default_factory=dict)


class SeedBudget(ExperimentRecord):
    """The RL arms' counts on one seed: distinct rollout and GRPO-step counts, arms whose plans repeated rows."""

    rollouts: list[int] = Field(default_factory=list)
    grpo_steps: list[int] = Field(default_factory=list)
    cycled: dict[str, list[int]] = Field(default_factory=dict)
    """arm -> [plan rows, distinct rows]."""


class BudgetAudit(ExperimentRecord):
    """The matched-budget audit (`bat.experiment.budget_audit.budget_audit`)."""

    matched: bool
    differing_fields: list[str] = Field(default_factory=list)
    stale: dict[str, dict[str, list[Any]]] = Field(default_factory=dict)
    """`arm/sN` -> field -> [ran under, now]."""
    unverified: list[str] = Field(default_factory=list)
    sft_digests: dict[str, dict[str, list[str]]] = Field(default_factory=dict)
    """bootstrap seed -> SFT digest (16 hex) -> `arm/sN` trained from it."""
    one_bootstrap: bool = True
    rl_arms: list[str] = Field(default_factory=list)
    per_seed: dict[str, SeedBudget] = Field(default_factory=dict)
    signature: dict[str, Any] = Field(default_factory=dict)
    note: str = ""


class PowerComparison(ExperimentRecord):
    """A comparison of two sets of wide runs (`bat.experiment.power`): paired (`n_runs` an int, `sd_delta`,
    `runs_differing`), unpaired or anchored on the SFT (`design`, `n_runs` and `sd` per side, the plain unpaired row
    under `unpaired`), or `error` when the runs cannot be compared."""

    design: str | None = None
    n_runs: int | list[int] | None = None
    mean_delta: float | None = None
    sd_delta: float | None = None
    sd: list[float] | None = None
    half_width: float | None = None
    p_value: float | None = None
    runs_differing: int | None = None
    minimum_detectable: float | None = None
    runs_needed: dict[str, int | None] | None = None
    unpaired: PowerComparison | None = None
    error: str | None = None


class WideArmSummary(ExperimentRecord):
    """One arm of a wide summary: its seeds, seeds per suite letter, runs, mean Overall and where it comes from."""

    seeds: list[int]
    suites: dict[str, list[int]] = Field(default_factory=dict)
    n_runs: int
    mean: float
    components: dict[str, float] = Field(default_factory=dict)
    """Mean Task and Agentic over runs (those the records carry)."""
    by_track: dict[str, float] = Field(default_factory=dict)


class WideSummary(ExperimentRecord):
    """The wide records of one repeats value: per arm, against the reference, against the SFT, beyond the null."""

    repeats: int
    arms: dict[str, WideArmSummary] = Field(default_factory=dict)
    vs_reference: dict[str, PowerComparison] = Field(default_factory=dict)
    vs_anchor: dict[str, PowerComparison] = Field(default_factory=dict)
    vs_null: dict[str, dict[str, PowerComparison]] = Field(default_factory=dict)


class ExperimentResults(ExperimentRecord):
    """`<out>/results.json`: everything the report shows, stamped with the command, commit and time."""

    schema_version: int = 1
    experiment: str = ""
    base_config: str = ""
    overrides: list[str] = Field(default_factory=list)
    seeds: list[int] = Field(default_factory=list)
    bootstrap_seed: int | None = None
    report_split: str = "final"
    stage_keys: list[str] = Field(default_factory=list)
    confidence: float = 0.95
    reference_arm: str = ""
    arms: dict[str, ArmResult] = Field(default_factory=dict)
    comparisons: dict[str, Comparison | None] = Field(default_factory=dict)
    """Arm -> reference - arm on the report split (None when not comparable)."""
    comparisons_by_split: dict[str, dict[str, Comparison | None]] = Field(default_factory=dict)
    held_out_profile: HeldOutProfile | None = None
    budget: BudgetAudit | None = None
    shared: dict[str, SharedRecord] = Field(default_factory=dict)
    """Seed -> the shared bootstrap serving it."""
    superseded: list[SeedRun] = Field(default_factory=list)
    wide: list[WideSummary] = Field(default_factory=list)
    shared_failures: dict[str, str] = Field(default_factory=dict)
    bootstrap_warnings: list[str] = Field(default_factory=list)
    wide_skipped: list[str] | None = None
    """Arm x seeds the wide evaluation skipped (returned to the CLI, not written)."""
    command: str = ""
    commit: str = ""
    created_at: str = ""

    def widest_wide(self) -> WideSummary | None:
        """The wide summary with the most runs per track, None without one."""
        return max(self.wide, key=lambda w: w.repeats, default=None)
