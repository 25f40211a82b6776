"""Phase "rollout": K rollouts per state of the round plan, written as resumable shards.

Reads `round_NN/plan.json` (state ids, pools, bank version, start checkpoint) and the pinned bank version;
writes `round_NN/rollout/shard_NNNN/` (see `bat.rollout.shards`). Launch: `bat run` / `bat rollout`.
With `rollout.stage_exit` and the plan's rubric reward, a stage row ends once its reward is settled (`stage_exit`);
the final reward reads Task and Overall, so those rounds never cut. Under `grpo.rollouts: online` the GRPO block
rolls out its own batches from the current weights, and this phase rolls out only the plan's first batch: the
round-start policy's record for the report's failure breakdown and signal counts (none with `grpo.online_record`
off).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bat.phase.context import PhaseContext, PhaseResult
from bat.phase.events import log_event
from bat.phase.plan import load_plan, resolve_checkpoint
from bat.phase.spec import Maybe, PhaseSpec, first_bank
from bat.rollout.runner import StateJob

if TYPE_CHECKING:
    from bat.config.rollout import RolloutConfig
    from bat.rollout.spec import LoopSettings
    from bat.schemas.routing import RoundPlan


def plan_jobs(plan: RoundPlan) -> tuple[list[StateJob], int]:
    """One job per state in first-listed order, `repeats` = how often the plan lists it; and the number of
    repeated entries (each still gets its K rollouts, as extra members of the state's one GRPO group)."""
    first: dict[str, tuple[str, str]] = {}
    listed: dict[str, int] = {}
    for batch in plan.batches:
        for row in batch:
            first.setdefault(row.state_id, (row.pool, row.stage))
            listed[row.state_id] = listed.get(row.state_id, 0) + 1
    jobs = [StateJob(state_id=s, pool=pool, stage=stage, repeats=listed[s]) for s, (pool, stage) in first.items()]
    return jobs, sum(listed.values()) - len(jobs)


def loop_settings(rc: RolloutConfig, reward_mode: str, tool_names: list[str]) -> LoopSettings:
    """The loop knobs of a training round from `rollout` config; stage rows are cut at their stage exit only with
    `rollout.stage_exit` and the rubric reward (`final` reads Task and Overall, which settle only at the end)."""
    from bat.rollout.spec import LoopSettings

    return LoopSettings(
        budgets=rc.budgets,
        temperature=rc.temperature,
        no_tool_call=rc.no_tool_call,
        tool_workers=rc.tool_workers,
        tool_names=tool_names,
        cohorts=rc.cohorts,
        schedule=rc.schedule,
        stage_exit=rc.stage_exit and reward_mode == "rubric",
        stage_row_turns=rc.stage_row_turns,
    )


def run_rollout(ctx: PhaseContext) -> PhaseResult:
    """Roll out every state of the round plan K times; resumes from finished shards."""
    from bat.bank.store import open_bank
    from bat.policy.loader import load_tokenizer
    from bat.policy.tools import config_tools
    from bat.rollout.chat import TurnTokens
    from bat.rollout.engines import make_engine
    from bat.rollout.envs import bank_opener
    from bat.rollout.runner import run_shards

    cfg, rc = ctx.config, ctx.config.rollout
    plan = load_plan(ctx.layout, ctx.round)
    bank = open_bank(ctx.layout, plan.bank_version)
    if cfg.grpo.rollouts == "online":  # the grpo block draws its own batches: the first one (or none) as a record
        plan = plan.model_copy(update={"batches": plan.batches[: 1 if cfg.grpo.online_record else 0]})
    jobs, dupes = plan_jobs(plan)
    jobs = [StateJob(j.state_id, j.pool, j.stage, payload=bank.row(j.state_id), repeats=j.repeats) for j in jobs]
    checkpoint = resolve_checkpoint(ctx.layout, plan.start_checkpoint)
    names, shown = config_tools(cfg)
    settings = loop_settings(rc, plan.reward_mode, names)
    summary = run_shards(
        ctx.phase_dir,
        jobs,
        k=rc.k,
        states_per_shard=rc.states_per_shard,
        run_seed=cfg.run.seed,
        round_index=ctx.round,
        open_env=bank_opener(bank, cfg),
        engine_factory=lambda: make_engine(rc, checkpoint),
        turn_tokens=lambda: TurnTokens(load_tokenizer(checkpoint), shown),
        settings=settings,
        scratch=ctx.layout.phase_scratch(ctx.round, "rollout"),
        keep_evidence=rc.keep_evidence,
        log=lambda msg: log_event(ctx.layout, ctx.round, ctx.phase, msg),
        stages=cfg.stage_keys,
    )
    reasons: dict[str, int] = {}
    for meta in summary.meta:
        for reason, n in meta.get("end_reasons", {}).items():
            reasons[reason] = reasons.get(reason, 0) + n
    return PhaseResult(
        outputs=summary.shards,
        inputs=[ctx.layout.plan(ctx.round)],
        counts={
            "states": len(jobs),
            "rollouts": sum(m["rollouts"] for m in summary.meta),
            "valid": sum(m["valid"] for m in summary.meta),
            "shards": len(summary.shards),
            "generated_tokens": sum(m["generated_tokens"] for m in summary.meta),
            "resumed_shards": len(summary.skipped),
        },
        extra={
            "end_reasons": reasons,
            "engine": rc.engine,
            "checkpoint": str(checkpoint),
            "bank_version": bank.version,
            "duplicate_plan_entries": dupes,
        },
    )


ROLLOUT = PhaseSpec(
    "rollout",
    run_rollout,
    reads=lambda L, r: (L.plan(r), first_bank(L).rl_rows, first_bank(L).states_dir, "the plan's start checkpoint"),
    writes=lambda L, r: tuple(
        Maybe(path, "not with grpo.online_record off")
        for path in (
            L.round(r).shard("rollout", 0).rollouts,
            L.round(r).shard("rollout", 0).timings,
            L.round(r).shard("rollout", 0).done,
        )
    ),
    resources="rollout",
)
