"""Practice-side text for the tokenizer corpus: briefs, tool calls and tool observations of scripted episodes.

Runs the benchmark's scripted agents on PRACTICE instances only (seeds derived from the build seed, in-process
runtime, in a temporary directory that is removed afterwards) and returns what an SFT row is made of: the
system turn's tool block, the agent preamble, the brief, every rendered response and every observation.
Held-out instances are never generated here.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bat.benchmark.prompts import PREAMBLE
from bat.policy.codec import render_tool_call
from bat.seeds import derive_seed

DEFAULT_AGENTS = ("expert", "recovery")
"""Scripted agents whose episodes feed the corpus (recovery adds error observations and fixes)."""


def tool_block(tools: Sequence[dict[str, Any]]) -> str:
    """The tool list as the chat template renders it into the system turn (`tojson` = `json.dumps` defaults)."""
    lines = "\n".join(json.dumps(tool, ensure_ascii=False) for tool in tools)
    return (
        '# Tools\nCall exactly one tool per turn as <tool_call>{"name": ..., "arguments": {...}}</tool_call>.\n'
        f"<tools>\n{lines}\n</tools>"
    )


def practice_texts(
    seed: int,
    *,
    tracks: Sequence[str] | None = None,
    agents: Sequence[str] = DEFAULT_AGENTS,
    episodes_per_track: int = 1,
) -> list[str]:
    """Texts of `episodes_per_track` practice instances per track (default: every benchmark track), each run by
    every agent in `agents`; deterministic for `seed`. Reads nothing from disk but the temporary episode dirs."""
    from bat.benchmark import TOOL_SPECS, TRACKS, practice_instance, run_agent
    from bat.benchmark.bank_side import open_instance
    from bat.config import load_config

    cfg = load_config(None, ["benchmark.runtime=inprocess"])
    chosen = list(tracks) if tracks is not None else list(TRACKS)
    unknown = [t for t in chosen if t not in TRACKS]
    if unknown:
        raise ValueError(f"unknown tracks {unknown}; valid: {list(TRACKS)}")
    head = [text for text in (PREAMBLE, tool_block(TOOL_SPECS)) if text]
    texts: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bat-corpus-") as tmp:
        root = Path(tmp)
        for track in chosen:
            for index in range(episodes_per_track):
                instance = practice_instance(track, derive_seed(seed, "tokenizer-corpus", track, index), cfg)
                if instance.space != "practice":
                    raise RuntimeError(f"{instance.instance_id}: tokenizer corpus only takes practice instances")
                for agent in agents:
                    work = root / f"{track}-{index}-{agent}"
                    with open_instance(instance, work / "workspace", work / "grader", cfg) as env:
                        brief = env.reset()
                        trajectory = run_agent(env, instance, agent)
                    texts += [*head, brief]
                    for turn in trajectory.turns:
                        texts += [render_tool_call(turn.call, thought=turn.thought), turn.observation]
        return [text.replace(str(root), ".") for text in texts]
