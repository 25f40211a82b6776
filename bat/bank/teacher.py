"""Teachers that run a practice task into a multi-turn trajectory: the benchmark's scripted variants or an LLM.

Both go through the same built-in environment's tools (`bat.benchmark.bank_side.open_instance`) and return a `TeacherRun` whose turns carry the assistant text in the
tool-call format, the observation, the stage tag and a normalised execution record. Normalisation makes runs
reproducible and machine-independent: timings are zeroed, the workspace/grader paths are replaced by
`/workspace` and `<grader>`, and host install roots (code checkout, venv, Python) are stripped from tracebacks.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.benchmark import prompts
from bat.policy.codec import InvalidAction, parse_tool_call, render_tool_call
from bat.schemas.bank import ChatMessage, TrajectoryTurn

if TYPE_CHECKING:
    from bat.bank.llm_client import ChatClient
    from bat.config.root import BatConfig

WORKSPACE_ALIAS = "/workspace"
GRADER_ALIAS = "<grader>"


@dataclass
class TeacherRun:
    """One finished teacher episode: brief, turns, raw records (for replay checks) and the grade."""

    brief: str
    turns: list[TrajectoryTurn]
    records: list[Any]
    score: Any
    teacher: str


def normalise_record(record: Any, workspace: Path, grader: Path) -> dict[str, Any]:
    """JSON form of an ExecutionRecord with duration zeroed and host paths replaced by their aliases."""
    data = record.model_dump(mode="json")
    data["duration_s"] = 0.0
    return _alias(data, workspace, grader)


def _host_roots() -> list[tuple[str, str]]:
    """Host install roots that tracebacks mention, mapped to "" (paths become relative to their root)."""
    import bat

    roots = {sys.prefix, sys.base_prefix, str(Path(bat.__file__).resolve().parent.parent)}
    return [(f"{root.rstrip('/')}/", "") for root in roots if root and root != "/"]


def _alias(value: Any, workspace: Path, grader: Path) -> Any:
    """`value` (JSON-able) with workspace/grader paths aliased and host install roots stripped (longest first)."""
    text = json.dumps(value, sort_keys=True)
    pairs = [
        (str(Path(grader).resolve()), GRADER_ALIAS),
        (str(Path(workspace).resolve()), WORKSPACE_ALIAS),
        *_host_roots(),
    ]
    for real, alias in sorted(pairs, key=lambda pair: len(pair[0]), reverse=True):
        text = text.replace(json.dumps(real)[1:-1], alias)
    return json.loads(text)


def alias_text(text: str, workspace: Path, grader: Path) -> str:
    """`text` with the workspace and grader host paths replaced by their aliases."""
    return _alias(text, workspace, grader)


def _open_env(instance: Any, workdir: Path, config: BatConfig) -> tuple[Any, Path, Path]:
    from bat.benchmark.bank_side import open_instance

    workspace, grader = Path(workdir) / "ws", Path(workdir) / "grader"
    return open_instance(instance, workspace, grader, config), workspace.resolve(), grader.resolve()


def run_scripted(instance: Any, variant: str, workdir: Path, config: BatConfig) -> TeacherRun:
    """Run the benchmark's scripted agent `variant` (expert / recovery / failure) on `instance` in `workdir`."""
    from bat.benchmark import AGENTS, run_agent

    if variant not in AGENTS:
        raise ValueError(f"unknown teacher variant {variant!r}; valid: {list(AGENTS)}")
    env, workspace, grader = _open_env(instance, workdir, config)
    brief = env.reset()
    result = run_agent(env, instance, variant)
    records = list(env.records)
    if len(records) != len(result.turns):
        raise RuntimeError(f"scripted {variant}: {len(result.turns)} turns but {len(records)} execution records")
    turns = []
    for t, (turn, record) in enumerate(zip(result.turns, records)):
        call = turn.call.as_dict() if hasattr(turn.call, "as_dict") else dict(turn.call)
        turns.append(
            TrajectoryTurn(
                t=t,
                stage=record.stage or turn.stage,
                response=render_tool_call(call, thought=turn.thought or ""),
                call=call,
                observation=alias_text(turn.observation, workspace, grader),
                record=normalise_record(record, workspace, grader),
                done=t == len(records) - 1 and env.done,
            )
        )
    return TeacherRun(alias_text(brief, workspace, grader), turns, records, env.score(), f"scripted:{variant}")


def run_llm(instance: Any, client: ChatClient, workdir: Path, config: BatConfig, max_turns: int) -> TeacherRun:
    """Let an LLM behind an OpenAI-compatible endpoint run `instance` for at most `max_turns` responses.

    Context = preamble + ordered stage skills (`bat.bank.skills.stage_skills`: the version's texts), the brief, then assistant/tool turns; malformed responses are
    stepped as invalid actions (error observations) and kept in the trajectory with `call=None`."""
    from bat.bank.skills import stage_skills
    from bat.benchmark import tool_specs

    env, workspace, grader = _open_env(instance, workdir, config)
    brief = env.reset()
    order = [s.key for s in config.stages]
    skill = prompts.e2e_skill_text(order, stage_skills(config), {s.key: s.name for s in config.stages})
    messages: list[ChatMessage] = [prompts.system_message(skill), prompts.user_message(brief)]
    specs = tool_specs(config.benchmark.execute_code)
    turns: list[TrajectoryTurn] = []
    for t in range(max_turns):
        response = client.complete(prompts.to_dicts(messages), specs)
        parsed = parse_tool_call(response, env.offered)
        call = None if isinstance(parsed, InvalidAction) else parsed.as_dict()
        obs = env.step(parsed.as_dict())
        text = alias_text(obs.text, workspace, grader)
        record = obs.record
        turns.append(
            TrajectoryTurn(
                t=t,
                stage=record.stage or env.current_stage(),
                response=response,
                call=call,
                observation=text,
                record=normalise_record(record, workspace, grader),
                done=obs.done,
            )
        )
        messages += [
            ChatMessage(role="assistant", content=response),
            ChatMessage(role="tool", content=text, name=call["name"] if call else None),
        ]
        if obs.done:
            break
    return TeacherRun(
        alias_text(brief, workspace, grader), turns, list(env.records), env.score(), f"llm:{client.config.model}"
    )
