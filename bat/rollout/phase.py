"""Phase "rollout": K rollouts per state of the round plan, written as resumable shards.

Reads `round_NN/plan.json` (state ids, pools, bank version, start checkpoint) and the pinned bank version;
writes `round_NN/rollout/shard_NNNN/` (see `bat.rollout.shards`). Launch: `bat run` / `bat rollout`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bat.orchestrate.context import PhaseContext, PhaseResult
from bat.rollout.runner import StateJob

if TYPE_CHECKING:
    from bat.schemas.routing import RoundPlan
    from bat.state.layout import RunLayout


def load_plan(layout: "RunLayout", round_index: int) -> "RoundPlan":
    """The round plan; a missing plan raises naming the file and the rounds that have one."""
    from bat.schemas.routing import RoundPlan
    from bat.state.atomic import read_json

    path = layout.plan(round_index)
    if not path.is_file():
        have = [r for r in layout.rounds() if layout.plan(r).is_file()]
        raise FileNotFoundError(f"{path}: no round plan for round {round_index}; rounds with a plan: {have}")
    return RoundPlan.model_validate(read_json(path))


def plan_jobs(plan: "RoundPlan") -> tuple[list[StateJob], int]:
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


def resolve_checkpoint(layout: "RunLayout", checkpoint: str) -> Path:
    """Absolute path of a checkpoint named in a plan (relative names are under the run root)."""
    path = Path(checkpoint)
    return path if path.is_absolute() else layout.root / path


def run_rollout(ctx: PhaseContext) -> PhaseResult:
    """Roll out every state of the round plan K times; resumes from finished shards."""
    from bat.bank.store import open_bank
    from bat.benchmark import TOOL_NAMES
    from bat.policy.loader import load_tokenizer
    from bat.rollout.chat import TurnTokens, policy_tools
    from bat.rollout.engine import make_engine
    from bat.rollout.envs import bank_opener
    from bat.rollout.loop import LoopSettings
    from bat.rollout.runner import run_shards
    from bat.orchestrate.events import log_event

    cfg, rc = ctx.config, ctx.config.rollout
    plan = load_plan(ctx.layout, ctx.round)
    bank = open_bank(ctx.layout, plan.bank_version)
    jobs, dupes = plan_jobs(plan)
    jobs = [StateJob(j.state_id, j.pool, j.stage, payload=bank.row(j.state_id), repeats=j.repeats) for j in jobs]
    checkpoint = resolve_checkpoint(ctx.layout, plan.start_checkpoint)
    settings = LoopSettings(budgets=rc.budgets, temperature=rc.temperature, no_tool_call=rc.no_tool_call,
                            tool_workers=rc.tool_workers, tool_names=list(TOOL_NAMES),
                            cohorts=rc.cohorts, schedule=rc.schedule)
    summary = run_shards(
        ctx.phase_dir, jobs, k=rc.k, states_per_shard=rc.states_per_shard, run_seed=cfg.run.seed,
        round_index=ctx.round, open_env=bank_opener(bank, cfg), engine_factory=lambda: make_engine(rc, checkpoint),
        turn_tokens=lambda: TurnTokens(load_tokenizer(checkpoint), policy_tools(cfg.sft.render_tools)),
        settings=settings,
        scratch=ctx.layout.phase_scratch(ctx.round, "rollout"), keep_evidence=rc.keep_evidence,
        log=lambda msg: log_event(ctx.layout, ctx.round, ctx.phase, msg))
    reasons: dict[str, int] = {}
    for meta in summary.meta:
        for reason, n in meta.get("end_reasons", {}).items():
            reasons[reason] = reasons.get(reason, 0) + n
    return PhaseResult(
        outputs=summary.shards, inputs=[ctx.layout.plan(ctx.round)],
        counts={"states": len(jobs), "rollouts": sum(m["rollouts"] for m in summary.meta),
                "valid": sum(m["valid"] for m in summary.meta), "shards": len(summary.shards),
                "generated_tokens": sum(m["generated_tokens"] for m in summary.meta),
                "resumed_shards": len(summary.skipped)},
        extra={"end_reasons": reasons, "engine": rc.engine, "checkpoint": str(checkpoint),
               "bank_version": bank.version, "duplicate_plan_entries": dupes})


rollout = run_rollout
"""Name used by the phase table (`bat.rollout.phase:rollout`)."""
