"""The grpo phase with `grpo.rollouts: online`: each step rolls out one plan batch afresh from the current weights.

Reads `round_NN/plan.json` (batches of Stage Bank states, reward mode, start checkpoint) and the pinned bank
version; writes the per-step rollout and reward shards under `round_NN/grpo/steps/` (`bat.state.online_layout`),
step checkpoints under `checkpoints/round_NN/`, `round_NN/grpo/metrics.jsonl` and the candidate export. Steps pass
through the plan's batches in a seeded order that changes with every pass (as `step_batches: plan` does); dynamic
sampling draws replacement states from the plan's own rows of the same pool, so the curriculum's choice of rows
holds.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import TYPE_CHECKING

from bat.phase.context import PhaseContext, PhaseResult
from bat.phase.plan import carried_optimizer, load_plan, plan_batches, resolve_checkpoint
from bat.phase.spec import PhaseSpec
from bat.seeds import derive_seed
from bat.train.phase import run_grpo as run_round_grpo

if TYPE_CHECKING:  # the phase table imports this module on login nodes without torch: heavy imports are deferred
    from bat.online.block import OnlineSource
    from bat.rollout.runner import StateJob
    from bat.schemas.routing import RoundPlan


def batch_jobs(plan: RoundPlan, index: int, bank: object) -> list[StateJob]:
    """The states of plan batch `index` as rollout jobs (a state listed twice gets its K rollouts twice, in one
    group), each carrying its bank row."""
    from bat.rollout.runner import StateJob

    listed: dict[str, list[str]] = {}
    for row in plan.batches[index]:
        listed.setdefault(row.state_id, [row.pool, row.stage, 0])  # type: ignore[list-item]
        listed[row.state_id][2] += 1  # type: ignore[operator]
    return [
        StateJob(state, pool, stage, payload=bank.row(state), repeats=n)  # type: ignore[attr-defined]
        for state, (pool, stage, n) in listed.items()
    ]


def pool_draws(plan: RoundPlan, seed: int) -> dict[str, list[tuple[str, str]]]:
    """Per pool, the plan's (state id, stage) pairs in a seeded order: where dynamic sampling draws from."""
    pools: dict[str, dict[str, str]] = {}
    for batch in plan.batches:
        for row in batch:
            pools.setdefault(row.pool, {}).setdefault(row.state_id, row.stage)
    out = {}
    for pool, states in sorted(pools.items()):
        order = sorted(states.items())
        random.Random(derive_seed(seed, "dynamic-sampling", pool)).shuffle(order)
        out[pool] = order
    return out


def online_source(ctx: PhaseContext, plan: RoundPlan, start: Path, seed: int) -> OnlineSource:
    """The round's `OnlineSource`: plan batches, the bank's environments, the plan's verifier, the rollout engine."""
    from bat.bank.store import open_bank
    from bat.online.block import OnlineSource
    from bat.policy.loader import load_tokenizer
    from bat.policy.tools import config_tools
    from bat.rollout.chat import TurnTokens
    from bat.rollout.engines import make_engine
    from bat.rollout.envs import bank_opener
    from bat.rollout.phase import loop_settings
    from bat.rollout.runner import StateJob
    from bat.train.grpo import plan_batch_of_step
    from bat.verify.phase import make_verifier, verify_shard

    cfg, rc = ctx.config, ctx.config.rollout
    bank = open_bank(ctx.layout, plan.bank_version)
    verifier = make_verifier(cfg, plan.reward_mode)
    n_batches = len(plan.batches)
    draws = pool_draws(plan, seed)

    def batch(step: int) -> list[StateJob]:
        return batch_jobs(plan, plan_batch_of_step(step, n_batches, seed), bank)

    def replacement(pool: str, step: int, draw: int) -> StateJob | None:
        states = draws.get(pool, [])
        if not states:
            return None
        state, stage = states[(step * 7 + draw) % len(states)]
        return StateJob(state, pool, stage, payload=bank.row(state))

    names, shown = config_tools(cfg)
    return OnlineSource(
        batch=batch,
        open_env=bank_opener(bank, cfg),
        verify=lambda shard, scratch: verify_shard(verifier, shard, bank, cfg, scratch),
        engine=lambda: make_engine(rc, start),
        turn_tokens=TurnTokens(load_tokenizer(start), shown),
        settings=loop_settings(rc, plan.reward_mode, names),
        k=rc.k,
        rollouts_per_step=max(len(b) for b in plan.batches) * rc.k,
        replacement=replacement,
        stages=cfg.stage_keys,
    )


def run_online_grpo(ctx: PhaseContext) -> PhaseResult:
    """An online GRPO block over the round plan's batches; returns the candidate as `extra["candidate"]`."""
    from bat.online.block import train_online

    cfg, layout = ctx.config, ctx.layout
    plan = load_plan(layout, ctx.round)
    start = resolve_checkpoint(layout, plan.start_checkpoint)
    seed = ctx.seed("data")
    export = layout.candidate_model(ctx.round)
    metrics = layout.training_metrics(ctx.round, ctx.phase)
    summary = train_online(
        start,
        online_source(ctx, plan, start, seed),
        cfg.grpo,
        seed=seed,
        round_index=ctx.round,
        root=ctx.phase_dir,
        ckpt_root=layout.round_checkpoints(ctx.round),
        export_dir=export,
        metrics_path=metrics,
        dtype=cfg.model.dtype,
        carry_from=carried_optimizer(layout, ctx.round, start, cfg.grpo.carry_optimizer),
    )
    counts = {k: v for k, v in summary.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return PhaseResult(
        outputs=[export, metrics],
        inputs=[layout.plan(ctx.round), start],
        counts=counts | {"plan_batches": len(plan_batches(plan))},
        extra={"candidate": str(export), "start_checkpoint": str(start), "last_step": summary["last"]},
    )


def run_grpo(ctx: PhaseContext) -> PhaseResult:
    """The grpo phase: an online block (`grpo.rollouts: online`) or a block over the round's rollout and reward shards
    (`bat.train.phase.run_grpo`)."""
    return run_online_grpo(ctx) if ctx.config.grpo.rollouts == "online" else run_round_grpo(ctx)


GRPO = PhaseSpec(
    "grpo",
    run_grpo,
    reads=lambda L, r: (
        L.plan(r),
        L.round(r).shard("rollout", 0).rollouts,
        L.round(r).shard("verify", 0).rewards,
        "the plan's start checkpoint",
    ),
    writes=lambda L, r: (L.round_checkpoints(r), L.candidate_model(r), L.training_metrics(r, "grpo")),
    resources="grpo",
)
