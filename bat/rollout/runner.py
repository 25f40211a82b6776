"""Shard driver: K rollouts per state, `states_per_shard` states per shard, resume by per-shard DONE markers.

Seeds come from (run seed, round, "rollout", shard, state_id, k), so a shard redone after an interruption
reproduces the same bytes. The engine is built lazily: a fully finished phase loads no model.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bat.benchmark.env import STAGE_ORDER
from bat.rollout.breakdown import analyse_run, opening_text
from bat.rollout.chat import TurnTokens
from bat.rollout.engine import Engine
from bat.rollout.loop import run_rollouts
from bat.rollout.shards import clear_partial, shard_dir, shard_done, shard_meta, write_shard
from bat.rollout.spec import Env, LoopSettings, RolloutOutcome, RolloutSpec
from bat.schemas.bank import E2E
from bat.schemas.breakdown import RunBreakdown
from bat.seeds import derive_seed


@dataclass(frozen=True)
class StateJob:
    """One Stage Bank state to roll out K times (one GRPO group)."""

    state_id: str
    pool: str
    stage: str
    payload: Any = None
    """Whatever `open_env` needs (e.g. the BankRow)."""
    repeats: int = 1
    """How often the plan lists this state (a pool cycled within a round): K rollouts per listing, all in the
    state's one GRPO group, so an arm with a small pool still gets the planned number of rollouts."""


@dataclass
class OpenedEnv:
    """An environment ready for one rollout, its workspace and the opening messages."""

    env: Env
    workspace: Path | None
    messages: list[dict[str, Any]] | None = None
    close: Callable[[], None] | None = None
    stage_exit: Callable[[int], bool] | None = None
    """The row's settled check (`RolloutSpec.stage_exit`): calls left -> True when nothing that follows can change
    the row's reward; None = the rollout is never cut (E2E rows)."""


@dataclass
class ShardRun:
    """Summary of a `run_shards` call."""

    shards: list[Path] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    written: list[int] = field(default_factory=list)
    meta: list[dict[str, Any]] = field(default_factory=list)


def plan_shards(jobs: Sequence[StateJob], states_per_shard: int) -> list[list[StateJob]]:
    """Split jobs into consecutive shards of `states_per_shard` (order kept)."""
    if states_per_shard < 1:
        raise ValueError(f"states_per_shard must be >= 1, got {states_per_shard}")
    return [list(jobs[i : i + states_per_shard]) for i in range(0, len(jobs), states_per_shard)]


def rollout_id(round_index: int, shard: int, state_id: str, k: int) -> str:
    """Stable id of one rollout."""
    return f"r{round_index:02d}-s{shard:04d}-{state_id}-k{k}"


def fit_context(settings: LoopSettings, model_limit: int | None, log: Callable[[str], None]) -> LoopSettings:
    """Settings whose context budget does not exceed what the model can attend to."""
    b = settings.budgets
    if model_limit is None or model_limit >= b.max_context_tokens:
        return settings
    log(
        f"rollout: context budget {b.max_context_tokens} exceeds the model's {model_limit} positions; using {model_limit}"
    )
    return replace(settings, budgets=b.model_copy(update={"max_context_tokens": model_limit}))


def shard_breakdowns(
    specs: Sequence[RolloutSpec],
    outcomes: Sequence[RolloutOutcome],
    stages: Sequence[str],
    tools: Sequence[dict[str, Any]] | None,
) -> list[RunBreakdown]:
    """Failure breakdown of each rollout (seen = its opening messages and tool list; a stage row opens in its
    stage, so earlier stages count as done)."""
    out = []
    for spec, outcome in zip(specs, outcomes):
        rec = outcome.record
        seen = opening_text(spec.messages, tools)
        start = spec.stage if spec.stage in stages else None
        out.append(analyse_run(rec.rollout_id, rec.turns, rec.end_reason, seen, stages, start_stage=start))
    return out


def run_shards(
    phase_dir: Path,
    jobs: Sequence[StateJob],
    *,
    k: int,
    states_per_shard: int,
    run_seed: int,
    round_index: int,
    open_env: Callable[[StateJob, int, Path], OpenedEnv],
    engine_factory: Callable[[], Engine],
    turn_tokens: Callable[[], TurnTokens],
    settings: LoopSettings,
    scratch: Path,
    keep_evidence: bool = True,
    log: Callable[[str], None] = lambda _msg: None,
    stages: Sequence[str] = STAGE_ORDER,
) -> ShardRun:
    """Write every missing shard under `phase_dir`; finished shards are skipped. Returns a summary."""
    phase_dir.mkdir(parents=True, exist_ok=True)
    clear_partial(phase_dir)
    out = ShardRun()
    engine: Engine | None = None
    tt: TurnTokens | None = None
    for index, shard_jobs in enumerate(plan_shards(jobs, states_per_shard)):
        out.shards.append(shard_dir(phase_dir, index))
        if shard_done(phase_dir, index):
            out.skipped.append(index)
            out.meta.append(shard_meta(shard_dir(phase_dir, index)))
            continue
        if engine is None:
            engine, tt = engine_factory(), turn_tokens()
            settings = fit_context(settings, getattr(engine, "max_context", None), log)
        work = shard_dir(scratch, index)
        shutil.rmtree(work, ignore_errors=True)
        specs, opened = [], []
        try:
            for job in shard_jobs:
                for kk in range(k * job.repeats):
                    rid = rollout_id(round_index, index, job.state_id, kk)
                    env = open_env(job, kk, work / rid)
                    opened.append(env)
                    specs.append(
                        RolloutSpec(
                            rollout_id=rid,
                            state_id=job.state_id,
                            k=kk,
                            env=env.env,
                            messages=env.messages,
                            seed=derive_seed(run_seed, round_index, "rollout", index, job.state_id, kk),
                            workspace=env.workspace,
                            round=round_index,
                            shard=index,
                            pool=job.pool,
                            stage=job.stage,
                            stage_exit=env.stage_exit if settings.stage_exit and job.stage != E2E else None,
                        )
                    )
            outcomes = run_rollouts(engine, specs, tt, settings)
            workspaces = {s.rollout_id: (s.workspace if keep_evidence else None) for s in specs}
            meta = {"engine": engine.name, "checkpoint": engine.checkpoint, "k": k, "round": round_index}
            breakdowns = shard_breakdowns(specs, outcomes, stages, tt.tools)
            write_shard(phase_dir, index, outcomes, workspaces, meta, breakdowns)
        finally:
            for env in opened:
                if env.close:
                    env.close()
            shutil.rmtree(work, ignore_errors=True)
        out.written.append(index)
        out.meta.append(shard_meta(shard_dir(phase_dir, index)))
        log(f"rollout shard {index}: {len(specs)} rollouts written")
    if engine is not None:
        engine.close()
    return out
