"""Drive held-out episodes: suite run -> instance materialised on the held-out side -> agent -> RunScore -> EvalRun.

Two drivers share one interface `Driver(prepared) -> list[EpisodeInfo]`: the policy driver runs a checkpoint
through the rollout engine and agent loop (token in / token out, budgets from `rollout.budgets`);
the scripted driver runs one of the benchmark's scripted agents (reference points, tests, benches).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.evaluate.aggregate import run_metrics
from bat.rollout.breakdown import transcript_of
from bat.schemas.breakdown import Transcript
from bat.schemas.evaluation import EvalRun
from bat.schemas.rollout import TurnRecord

if TYPE_CHECKING:
    from bat.config.root import BatConfig

SCRIPTED_PREFIX = "scripted:"


@dataclass
class PreparedRun:
    """One held-out run ready to play: its suite entry, instance, workspace, grader dir and environment."""

    run: Any
    """`bat.benchmark.SuiteRun` (run_id, track, repeat, instance_seed, sampling_seed)."""
    instance: Any
    workspace: Path
    grader: Path
    env: Any


@dataclass
class EpisodeInfo:
    end_reason: str
    turns: int = 0
    infra_error: str | None = None
    """Set when the episode failed for infrastructure reasons (engine down): its cells become null."""
    transcript: Transcript | None = None
    """What the agent saw and did, turn by turn, with its failure breakdown (held-out side only)."""


Driver = Callable[[Sequence[PreparedRun]], list[EpisodeInfo]]


def prepare_run(run: Any, cfg: BatConfig, work_root: Path) -> PreparedRun:
    """Environment of the run's fixed instance; `reset()` (by the driver) materialises
    `work_root/<run_id>/workspace` and its grader dir beside it (outside the workspace)."""
    from bat.benchmark import StagedEnv, suite_instance

    base = work_root / run.run_id
    if base.exists():
        shutil.rmtree(base)
    workspace, grader = base / "workspace", base / "grader"
    instance = suite_instance(run, cfg)
    return PreparedRun(
        run=run, instance=instance, workspace=workspace, grader=grader, env=StagedEnv(instance, workspace, grader, cfg)
    )


def scripted_turns(trajectory: Any, records: Sequence[Any]) -> list[TurnRecord]:
    """Turn records of a scripted agent's trajectory: its rendered call, the observation and the execution record."""
    from bat.policy.codec import render_tool_call

    turns = []
    for index, (turn, record) in enumerate(zip(trajectory.turns, records)):
        call = dict(turn.call)
        turns.append(
            TurnRecord(
                index=index,
                response_text=render_tool_call(call, thought=turn.thought or ""),
                generated_tokens=0,
                finish="stop",
                call=call,
                observation=turn.observation,
                observation_chars=len(turn.observation),
                record=record.model_dump(mode="json", exclude={"duration_s"}),
            )
        )
    return turns


def scripted_driver(agent: str) -> Driver:
    """Play every run with the benchmark's scripted `agent` (one of `bat.benchmark.AGENTS`); each run's transcript
    uses the opening and tool list its environment's config gives the policy."""
    from bat.benchmark import AGENTS, run_agent
    from bat.policy.tools import policy_tools

    if agent not in AGENTS:
        raise ValueError(f"unknown scripted agent {agent!r}; valid: {list(AGENTS)}")

    def drive(prepared: Sequence[PreparedRun]) -> list[EpisodeInfo]:
        out = []
        for item in prepared:
            brief = item.env.reset()
            trajectory = run_agent(item.env, item.instance, agent)
            end = "done" if item.env.done else "no_tool_call"
            cfg = item.env.config
            transcript = transcript_of(
                item.run.run_id,
                item.run.track,
                end,
                opening_messages(cfg, brief),
                scripted_turns(trajectory, item.env.records),
                cfg.stage_keys,
                policy_tools(cfg.sft.render_tools, cfg.sft.tool_format),
            )
            out.append(EpisodeInfo(end_reason=end, turns=len(trajectory.turns), transcript=transcript))
        return out

    return drive


def opening_messages(cfg: BatConfig, brief: str) -> list[dict[str, str]]:
    """The BaT Agent's fixed opening: system = agent preamble + every public stage skill in order, user = brief.

    The same shape as the bank's E2E rows and teacher context, so evaluation shows the policy what it trained on.
    """
    from bat.benchmark import STAGE_SKILLS, prompts

    names = {s.key: s.name for s in cfg.stages}
    skill = prompts.e2e_skill_text(cfg.stage_keys, STAGE_SKILLS, names)
    return prompts.to_dicts([prompts.system_message(skill), prompts.user_message(brief)])


def policy_driver(cfg: BatConfig, checkpoint: Path) -> tuple[Driver, Callable[[], None]]:
    """Run `checkpoint` through the rollout engine + agent loop; returns (driver, close)."""
    from bat.benchmark import TOOL_NAMES
    from bat.policy.loader import load_tokenizer
    from bat.policy.tools import policy_tools
    from bat.rollout.chat import TurnTokens
    from bat.rollout.engines import make_engine
    from bat.rollout.loop import run_rollouts
    from bat.rollout.spec import LoopSettings, RolloutSpec

    engine = make_engine(cfg.rollout, checkpoint)
    tools = policy_tools(cfg.sft.render_tools, cfg.sft.tool_format)
    turn_tokens = TurnTokens(load_tokenizer(checkpoint), tools)
    settings = LoopSettings(
        budgets=cfg.rollout.budgets,
        temperature=cfg.evaluate.temperature,
        no_tool_call=cfg.rollout.no_tool_call,
        tool_workers=cfg.rollout.tool_workers,
        tool_names=list(TOOL_NAMES),
        cohorts=cfg.rollout.cohorts,
        schedule=cfg.rollout.schedule,
    )

    def drive(prepared: Sequence[PreparedRun]) -> list[EpisodeInfo]:
        specs = [
            RolloutSpec(
                rollout_id=p.run.run_id,
                state_id=p.run.run_id,
                k=0,
                seed=int(p.run.sampling_seed),
                env=p.env,
                workspace=p.workspace,
                messages=opening_messages(cfg, p.env.reset()),
            )
            for p in prepared
        ]
        outcomes = run_rollouts(engine, specs, turn_tokens, settings)
        infos = []
        for p, spec, outcome in zip(prepared, specs, outcomes):
            rec = outcome.record
            infra = rec.invalid_reason if rec.end_reason == "error" else None
            transcript = transcript_of(
                p.run.run_id, p.run.track, rec.end_reason, spec.messages or [], rec.turns, cfg.stage_keys, tools
            )
            infos.append(
                EpisodeInfo(end_reason=rec.end_reason, turns=len(rec.turns), infra_error=infra, transcript=transcript)
            )
        return infos

    return drive, engine.close


def to_eval_run(item: PreparedRun, info: EpisodeInfo, split: str, cfg: BatConfig, seconds: float) -> EvalRun:
    """Score the finished episode (grader side) into an `EvalRun`; infrastructure failures become null cells."""
    run = item.run
    base = dict(
        run_id=run.run_id,
        split=split,
        track=run.track,
        repeat=int(run.repeat),
        seed=int(run.sampling_seed),
        instance_id=str(getattr(item.instance, "instance_id", "")),
        end_reason=info.end_reason,
        turns=info.turns,
        duration_s=round(seconds, 3),
    )
    keys = list(cfg.stage_keys)
    if info.infra_error is not None:
        return EvalRun(**base, stages=dict.fromkeys(keys), task=None, null_reason=info.infra_error)
    try:
        score = item.env.score(run_id=run.run_id, repeat=int(run.repeat))
    except Exception as exc:  # grader/harness failure: an infrastructure-null run, reported not zeroed
        return EvalRun(**base, stages=dict.fromkeys(keys), task=None, null_reason=f"score: {type(exc).__name__}: {exc}")
    return score_to_run(score, base, cfg)


def score_to_run(score: Any, base: dict[str, Any], cfg: BatConfig) -> EvalRun:
    """`RunScore` -> `EvalRun`: the benchmark's Agentic/Overall are kept (one scoring source); a run whose
    cells are all present but lacks them is completed with `run_metrics`. Null reasons are carried."""
    stages = {k: score.stages[k] for k in cfg.stage_keys if k in score.stages}
    agentic, overall = score.agentic, score.overall
    if agentic is None and stages and all(v is not None for v in stages.values()) and score.task is not None:
        agentic, overall = run_metrics(stages, score.task, cfg.stage_weights, breach=bool(score.breach))
    null_reason = "; ".join(score.null_reasons) or (None if score.valid else "invalid run")
    return EvalRun(
        **base,
        stages=stages,
        task=score.task,
        agentic=agentic,
        overall=overall,
        breach=bool(score.breach),
        null_reason=null_reason,
    )


def play(
    prepared: Sequence[PreparedRun], driver: Driver, split: str, cfg: BatConfig
) -> list[tuple[EvalRun, Transcript | None]]:
    """Drive a chunk of prepared runs and score each; returns (run, transcript) pairs. Wall time is shared evenly
    across the chunk."""
    start = time.monotonic()
    infos = driver(prepared)
    seconds = (time.monotonic() - start) / max(1, len(prepared))
    return [(to_eval_run(item, info, split, cfg, seconds), info.transcript) for item, info in zip(prepared, infos)]
