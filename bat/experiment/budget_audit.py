"""The matched-budget audit of an experiment: which budget fields an arm x seed must have run under, which finished
runs are stale against the experiment file, and whether the trained arms ran under one budget and one bootstrap.

Reads nothing from disk: it works on the experiment spec (resolved arm configs) and on the per-seed results
`bat.experiment.collect` gathered (their `budget`, `rollouts`, `grpo_steps`, plan counts, `shared_sft_digest`).
"""

from __future__ import annotations

from typing import Any

from bat.curriculum.arms import resolve_arm
from bat.experiment.spec import (
    BUDGET_FIELD_DEFAULTS,
    ExperimentSpec,
    arm_config,
    bootstrap_seed_of,
    budget_signature,
)
from bat.schemas.experiment import SeedRun
from bat.schemas.experiment_results import ArmResult, BudgetAudit, SeedBudget

RL_ONLY_FIELDS = ("curriculum.", "rollout.", "grpo.")
"""Budget fields that only an arm with RL rounds uses (the sft arm's run is held to the others only)."""

STAGE_ROW_FIELDS = ("rollout.state_context", "grpo.stage_row_credit")
"""Budget fields that only shape stage rows (S-target / S-mix): an arm that draws E2E rows alone is not held to
them."""


FINAL_REWARD_FIELDS = ("verify.final_reward",)
"""Budget fields that only shape the single final reward: an arm whose rounds pay the rubric is not held to them."""


def expected_budget(cfg: Any) -> dict[str, Any]:
    """The budget fields an arm x seed under `cfg` must have run under: all of `budget_signature`, less the RL-only
    fields for an arm without RL rounds, the stage-row fields for an arm without stage pools and the final-reward
    fields for an arm whose rounds are not paid the final reward."""
    sig = budget_signature(cfg)
    arm = resolve_arm(cfg.curriculum)
    if arm.reward_mode != "final":
        sig = {k: v for k, v in sig.items() if k not in FINAL_REWARD_FIELDS}
    if not arm.rl:
        return {k: v for k, v in sig.items() if not k.startswith(RL_ONLY_FIELDS)}
    if not arm.routed:  # E2E rows only
        return {k: v for k, v in sig.items() if k not in STAGE_ROW_FIELDS}
    return sig


def mark_stale(seed_run: SeedRun, expected: dict[str, Any]) -> None:
    """Set a finished arm x seed whose recorded `budget` differs from `expected` to status `stale`, with
    `stale_fields` = field -> [recorded, expected]; a field the record predates counts as its
    `BUDGET_FIELD_DEFAULTS` value. Runs without a recorded budget are left as they are."""
    recorded = seed_run.budget
    if not seed_run.done or recorded is None:
        return
    ran = {k: recorded.get(k, BUDGET_FIELD_DEFAULTS.get(k)) for k in expected}
    diff = {k: [ran[k], v] for k, v in expected.items() if ran[k] != v}
    if diff:
        seed_run.status = "stale"
        seed_run.stale_fields = diff


def _seed_budget(arms: dict[str, ArmResult], rl: list[str], seed: int) -> SeedBudget:
    """The RL arms' finished runs of `seed`: distinct rollout and GRPO-step counts, arms whose plans cycled."""
    runs = {n: next((s for s in arms[n].seeds if s.seed == seed), None) for n in rl}
    done = {n: s for n, s in runs.items() if s is not None and s.done}
    return SeedBudget(
        rollouts=sorted({s.rollouts for s in done.values()}),
        grpo_steps=sorted({s.grpo_steps for s in done.values()}),
        cycled={n: [s.plan_rows, s.plan_unique_rows] for n, s in done.items() if s.plan_unique_rows < s.plan_rows},
    )


def budget_audit(spec: ExperimentSpec, arms: dict[str, ArmResult]) -> BudgetAudit:
    """Matched-budget audit: resolved budget fields equal across trained arms; RL arms' rollouts/steps per seed."""
    sigs = {a.name: budget_signature(arm_config(spec, a, spec.seeds[0])) for a in spec.arms if a.kind == "trained"}
    first = next(iter(sigs.values()), {})
    differing = sorted({k for s in sigs.values() for k in s if s[k] != first.get(k)})
    rl = [
        a.name
        for a in spec.arms
        if a.kind == "trained" and resolve_arm(arm_config(spec, a, spec.seeds[0]).curriculum).rl
    ]
    per_seed = {str(seed): _seed_budget(arms, rl, seed) for seed in spec.seeds}
    # every trained arm x seed served by one bootstrap must have trained from the same SFT checkpoint (a bootstrap
    # rebuilt on another CPU kind in a later piece may differ in the last bits)
    trained = [(a.name, s) for a in spec.arms if a.kind == "trained" for s in arms[a.name].seeds]
    sft_digests: dict[str, dict[str, list[str]]] = {}
    for name, s in trained:
        if s.done and s.shared_sft_digest:
            boot = str(bootstrap_seed_of(spec, s.seed))
            sft_digests.setdefault(boot, {}).setdefault(s.shared_sft_digest[:16], []).append(f"{name}/s{s.seed}")
    one_bootstrap = all(len(d) <= 1 for d in sft_digests.values())
    stale = {f"{n}/s{s.seed}": s.stale_fields or {} for n, s in trained if s.status == "stale"}
    unverified = [f"{n}/s{s.seed}" for n, s in trained if s.done and s.budget is None]
    matched = (
        not differing
        and not stale
        and one_bootstrap
        and all(len(v.rollouts) <= 1 and len(v.grpo_steps) <= 1 for v in per_seed.values())
    )
    return BudgetAudit(
        matched=matched,
        differing_fields=differing,
        stale=stale,
        unverified=unverified,
        sft_digests=sft_digests,
        one_bootstrap=one_bootstrap,
        rl_arms=rl,
        per_seed=per_seed,
        signature=first,
        note="cycled = arm: [plan rows, distinct rows]; a pool smaller than a round repeats "
        "rows: each listing still gets K rollouts (extra members of the state's one GRPO group), so the "
        "rollout count matches but that arm sees fewer distinct states (enlarge the bank)",
    )
