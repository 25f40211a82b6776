"""Drive held-out episodes: held-out run -> the configured benchmark's environment on the held-out side -> agent ->
score -> EvalRun. The benchmark is the one `benchmark.name` names (`bat.staged.registry`), reached only through
`bat.staged.interface`.

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


@dataclass(frozen=True)
class HeldoutRun:
    """One held-out run: `<split>-<track>-rNN`, its benchmark task and the sampling seed of a policy playing it."""

    run_id: str
    split: str
    track: str
    repeat: int
    sampling_seed: int
    task: Any
    """`bat.staged.interface.Task`."""

    @property
    def instance_seed(self) -> int:
        """The seed the task was drawn from (the built-in suite's instance seed)."""
        return int(self.task.seed)


@dataclass
class PreparedRun:
    """One held-out run ready to play: the run, its benchmark, the environment and its workspace folder (the run's
    folder `base` holds the workspace and the benchmark's grader side)."""

    run: HeldoutRun
    config: Any
    """The run's `BatConfig`."""
    bench: Any
    """`bat.staged.interface.Benchmark`."""
    env: Any
    """`bat.staged.interface.Environment`."""
    base: Path
    workspace: Path | None


@dataclass
class EpisodeInfo:
    end_reason: str
    turns: int = 0
    infra_error: str | None = None
    """Set when the episode failed for infrastructure reasons (engine down): its cells become null."""
    transcript: Transcript | None = None
    """What the agent saw and did, turn by turn, with its failure breakdown (held-out side only)."""


Driver = Callable[[Sequence[PreparedRun]], list[EpisodeInfo]]


def prepare_run(run: HeldoutRun, cfg: BatConfig, work_root: Path) -> PreparedRun:
    """The configured benchmark's environment on the run's task under `work_root/<run_id>`; `reset()` (by the driver)
    materialises the workspace there and the grader side beside it."""
    from bat.staged.registry import from_config

    base = work_root / run.run_id
    if base.exists():
        shutil.rmtree(base)
    bench = from_config(cfg)
    env = bench.open(run.task, base)
    return PreparedRun(run=run, config=cfg, bench=bench, env=env, base=base, workspace=env.workspace)


def scripted_turns(pairs: Sequence[tuple[Any, Any]]) -> list[TurnRecord]:
    """Turn records of a scripted agent's (action, step) pairs: its rendered call and thought, the observation and
    the call's record."""
    from bat.policy.codec import render_tool_call

    turns = []
    for index, (action, step) in enumerate(pairs):
        call = {k: v for k, v in action.items() if k != "thought"}
        turns.append(
            TurnRecord(
                index=index,
                response_text=render_tool_call(call, thought=action.get("thought") or ""),
                generated_tokens=0,
                finish="stop",
                call=call,
                observation=step.observation,
                observation_chars=len(step.observation),
                record={k: v for k, v in step.info.items() if k != "duration_s"},
            )
        )
    return turns


def _play_scripted(item: PreparedRun, agent: str) -> tuple[str, list[tuple[Any, Any]]]:
    """Reset the run's environment and drive the benchmark's scripted `agent` until it stops or the episode ends;
    returns the brief and the (action, step) pairs."""
    if agent not in item.bench.agents:
        raise ValueError(f"unknown scripted agent {agent!r} for {item.bench.name}; valid: {list(item.bench.agents)}")
    brief = item.env.reset()
    act, observation, pairs = item.bench.agent(item.run.task, agent), brief, []
    while (action := act(observation)) is not None:
        step = item.env.step(action)
        pairs.append((action, step))
        observation = step.observation
        if step.done:
            break
    return brief, pairs


def scripted_driver(agent: str) -> Driver:
    """Play every run with the benchmark's scripted `agent` (the built-in's `bat.benchmark.AGENTS`, or one of
    another benchmark's `agents`); each run's transcript uses the opening and tool list the policy would get."""
    from bat.benchmark import AGENTS

    if agent not in AGENTS and not _plugin_agent(agent):
        raise ValueError(f"unknown scripted agent {agent!r}; valid: {list(AGENTS)} or a benchmark's own agents")

    def drive(prepared: Sequence[PreparedRun]) -> list[EpisodeInfo]:
        out = []
        for item in prepared:
            brief, pairs = _play_scripted(item, agent)
            end = "done" if pairs and pairs[-1][1].done else "no_tool_call"
            cfg = item.config
            transcript = transcript_of(
                item.run.run_id,
                item.run.track,
                end,
                opening_messages(cfg, brief, item.bench),
                scripted_turns(pairs),
                cfg.stage_keys,
                shown_tools(cfg, item.bench),
            )
            out.append(EpisodeInfo(end_reason=end, turns=len(pairs), transcript=transcript))
        return out

    return drive


def _plugin_agent(agent: str) -> bool:
    """Whether some registered benchmark other than the built-in one has a scripted agent of that name."""
    from bat.staged import registry

    return any(agent in registry.load(name).agents for name in registry.names() if name != "builtin")


def shown_tools(cfg: BatConfig, bench: Any) -> list[dict[str, Any]] | None:
    """The benchmark's tools as the policy's system turn renders them (`sft.render_tools`, `sft.tool_format`)."""
    from bat.policy.tools import policy_tools

    return policy_tools(cfg.sft.render_tools, cfg.sft.tool_format, bench.tools())


def opening_messages(cfg: BatConfig, brief: str, bench: Any = None) -> list[dict[str, str]]:
    """The BaT Agent's fixed opening: system = agent preamble + every public stage skill in order, user = brief.
    Skills come from `bench` (default: the configured benchmark), names from the `stages` config.

    The same shape as the bank's E2E rows and teacher context, so evaluation shows the policy what it trained on.
    """
    from bat.benchmark import prompts
    from bat.staged.registry import from_config

    bench = bench or from_config(cfg)
    names = {s.key: s.name for s in cfg.stages}
    skills = {s.key: s.skill for s in bench.stages()}
    skill = prompts.e2e_skill_text(cfg.stage_keys, skills, names)
    return prompts.to_dicts([prompts.system_message(skill, bench.preamble), prompts.user_message(brief)])


def policy_driver(cfg: BatConfig, checkpoint: Path) -> tuple[Driver, Callable[[], None]]:
    """Run `checkpoint` through the rollout engine + agent loop on the configured benchmark; returns (driver,
    close)."""
    from bat.policy.loader import load_tokenizer
    from bat.rollout.chat import TurnTokens
    from bat.rollout.engines import make_engine
    from bat.rollout.loop import run_rollouts
    from bat.rollout.spec import LoopSettings, RolloutSpec
    from bat.staged.registry import from_config

    bench = from_config(cfg)
    engine = make_engine(cfg.rollout, checkpoint)
    tools = shown_tools(cfg, bench)
    turn_tokens = TurnTokens(load_tokenizer(checkpoint), tools)
    settings = LoopSettings(
        budgets=cfg.rollout.budgets,
        temperature=cfg.evaluate.temperature,
        no_tool_call=cfg.rollout.no_tool_call,
        tool_workers=cfg.rollout.tool_workers,
        tool_names=[t["name"] for t in bench.tools()],
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
                messages=opening_messages(cfg, p.env.reset(), bench),
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
        instance_id=item.run.task.task_id,
        end_reason=info.end_reason,
        turns=info.turns,
        duration_s=round(seconds, 3),
    )
    keys = list(cfg.stage_keys)
    if info.infra_error is not None:
        return EvalRun(**base, stages=dict.fromkeys(keys), task=None, null_reason=info.infra_error)
    try:
        score = item.env.score()
    except Exception as exc:  # grader/harness failure: an infrastructure-null run, reported not zeroed
        return EvalRun(**base, stages=dict.fromkeys(keys), task=None, null_reason=f"score: {type(exc).__name__}: {exc}")
    return score_to_run(score, base, cfg)


def score_to_run(score: Any, base: dict[str, Any], cfg: BatConfig) -> EvalRun:
    """A benchmark's score (`interface.Score`, or the built-in `RunScore`) -> `EvalRun`: its Agentic/Overall are kept (one scoring source); a run whose
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
