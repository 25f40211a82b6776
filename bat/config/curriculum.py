"""Outer-loop knobs: baseline arm, pools and mixture, promotion gate, fallback, domain-shift detector."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from bat.config.base import Section
from bat.config.stages import builtin_declared

POOL_NAMES = ("S-target", "S-mix", "E2E")


class GateConfig(Section):
    enabled: bool = True
    """Promotion gate on; when off, every candidate not caught by fallback seeds the next round (paper Eq. 6)."""
    max_overall_drop: float = Field(0.01, ge=0.0, le=1.0)
    """Largest allowed drop of Overall vs the retained best ([0, 1] scale)."""
    max_task_drop: float = Field(0.03, ge=0.0, le=1.0)
    """Largest allowed drop of Task vs the retained best."""
    max_track_drop: float = Field(0.05, ge=0.0, le=1.0)
    """Largest allowed drop of any track's Overall mean vs the retained best."""
    late_stages: tuple[str, ...] = Field(default_factory=lambda: tuple(builtin_declared().LATE_STAGES))
    """Stages whose individual drop is bounded by `max_late_stage_drop`; configured stage keys (default: the
    benchmark's stages after the first two, e.g. validation, inference and submission of the built-in five)."""
    max_late_stage_drop: float = Field(0.03, ge=0.0, le=1.0)
    """Largest allowed drop of each late stage."""
    catastrophic_drop: float = Field(0.20, gt=0.0, le=1.0)
    """Any metric/stage/track dropping by this much or more fails the gate."""
    max_abort_fraction: float = Field(0.25, ge=0.0, le=1.0)
    """Training health: largest allowed fraction of aborted (infrastructure-failed) rollouts."""


class FallbackConfig(Section):
    patience: int = Field(3, ge=1)
    """Fall back to the best checkpoint after this many consecutive Overall drops."""
    kl_tau: float = Field(0.1, gt=0.0)
    """Fall back when mean per-token KL(candidate || best) exceeds this."""
    kl_enabled: bool = True
    """Measure KL(candidate || best) on held-back bank prompts (needs both checkpoints on disk)."""
    kl_prompts: int = Field(256, ge=1)
    """Bank rows held back from training as KL probe prompts."""
    kl_max_fraction: float = Field(0.25, gt=0.0, lt=1.0)
    """At most this fraction of a bank's rows is held back as KL probes (small banks keep most rows for training)."""
    kl_new_tokens: int = Field(32, ge=1)
    """Continuation tokens the candidate samples per probe prompt; KL is averaged over them."""


class CurriculumConfig(Section):
    arm: Literal["bicurl", "grpo", "sft"] = "bicurl"
    """Baseline arm: `bicurl` (routed pools), `grpo` (E2E rows, single final reward), `sft` (no RL rounds)."""
    pools: tuple[Literal["S-target", "S-mix", "E2E"], ...] = POOL_NAMES
    """Pools that enter training (bicurl arm); an omitted pool is switched off and rho renormalised."""
    rho: dict[str, float] = Field(default_factory=lambda: {"S-target": 0.5, "S-mix": 0.25, "E2E": 0.25})
    """Pool proportions (S-target, S-mix, E2E) before renormalisation over the enabled pools."""
    target_stage: str | None = None
    """Pin the S-target pool to this stage in every round instead of the router's pick (Eq. 5); the route records
    the rule `pinned`. For experiments that train one stage's rows whatever the controller scores say (a target the
    policy never passes gives GRPO groups of equal rewards, which train nothing). None = the router (default). Must
    be one of the configured stage keys."""
    batch_size: int = Field(8, ge=1)
    """Rows per batch; composition is exact (largest remainder of batch_size * rho)."""
    batches_per_round: int = Field(4, ge=1)
    """Batches drawn for one round (the GRPO steps of the round)."""
    exhausted: Literal["error", "cycle"] = "cycle"
    """A pool smaller than a round needs: `error`, or `cycle`: start a fresh permutation of the pool, so rows repeat
    within the round (recorded as `passes` in the plan and logged in the round's events by the route that wrote it);
    a repeated row's rollouts join its state's one GRPO group."""
    gate: GateConfig = Field(default_factory=GateConfig)
    """Promotion gate thresholds."""
    fallback: FallbackConfig = Field(default_factory=FallbackConfig)
    """Fallback to the best checkpoint."""
    retain: Literal["best", "last"] = "best"
    """Which checkpoint the run keeps as its retained best (the one later rounds and the end-of-run evaluation
    use). `best`: the outer loop's choice (gate, fallback, or the higher controller Overall). `last`: every
    candidate is retained whatever its scores (no fallback, no gate): for experiments that score the end of
    training itself; the route still records the drop counter and KL."""
    shift_track_drop: float = Field(0.10, gt=0.0, le=1.0)
    """Domain-shift detector: a track dropping this much while the mean of tracks does not drop is a shift."""
    shift_response: Literal["focus", "report"] = "focus"
    """What a detected shift changes (the paper, Fig. 1, names the detector, not its response). `focus`: each pool of
    the next round draws its rows from the shifted tracks when they hold enough rows for the round (else from every
    track); `report`: only the decision record and the report say so. Either way a steered bank refresh
    (`orchestrate.bank_refresh`, `bank.refresh_steering: weakness`) splits its tasks by 1 - track Overall of the
    same evaluation, where the drop counts; a `focus` decision names the refresh only when one runs."""

    @model_validator(mode="after")
    def _check(self) -> CurriculumConfig:
        unknown = sorted(set(self.rho) - set(POOL_NAMES))
        if unknown:
            raise ValueError(f"curriculum.rho has unknown pools {unknown}; valid: {list(POOL_NAMES)}")
        if not self.pools:
            raise ValueError(f"curriculum.pools is empty; choose from {list(POOL_NAMES)}")
        if len(set(self.pools)) != len(self.pools):
            raise ValueError(f"curriculum.pools repeats a pool: {list(self.pools)}")
        missing = [p for p in self.pools if self.rho.get(p, 0.0) <= 0.0]
        if missing:
            raise ValueError(f"curriculum.rho needs a positive weight for enabled pools {missing}; got {self.rho}")
        if self.arm == "grpo" and tuple(self.pools) not in (("E2E",), POOL_NAMES):
            raise ValueError(
                f"arm 'grpo' trains on E2E rows only; leave pools at default or set ['E2E'], got {list(self.pools)}"
            )
        return self
