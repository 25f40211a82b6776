"""Scripted agents on a benchmark's held-out split through `bat.staged.interface` (any registered benchmark).

`run_heldout(bench, agent, split=..., seed=..., secret=...)` plays the benchmark's scripted `agent` on every held-out
task of `split` and returns one `HeldoutResult` per task; `bat.benchmark.suite.aggregate` averages them (track means,
then their mean). For the built-in benchmark the tasks, episodes and scores are those of `run_suite` (a test holds
them equal).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from bat.staged.interface import Benchmark, Score, play


def heldout_run_id(split: str, track: str, repeat: int) -> str:
    """The id of held-out run `repeat` of `track` on `split`: `<split>-<track>-rNN` (every benchmark's)."""
    return f"{split}-{track}-r{repeat:02d}"


@dataclass(frozen=True)
class HeldoutResult:
    """One held-out run: `<split>-<track>-rNN`, its task and its score (the fields `aggregate` reads)."""

    run_id: str
    track: str
    task_id: str
    repeat: int
    score: Score

    @property
    def overall(self) -> float | None:
        return self.score.overall

    @property
    def agentic(self) -> float | None:
        return self.score.agentic

    @property
    def task(self) -> float | None:
        return self.score.task


def run_heldout(
    bench: Benchmark,
    agent: str,
    *,
    split: str,
    seed: int,
    secret: str,
    count: int | None = None,
    tracks: tuple[str, ...] | None = None,
    workdir: str | Path | None = None,
) -> list[HeldoutResult]:
    """Play `agent` on the held-out tasks of `split` (from `seed` and `secret`; `count` per track, the benchmark's
    default when None; only `tracks` when given). Episodes run under `workdir` (a temporary directory by default)."""
    if agent not in bench.agents:
        raise ValueError(f"unknown agent {agent!r} for {bench.name}; valid: {list(bench.agents)}")
    tasks = [t for t in bench.tasks(split, seed=seed, count=count, secret=secret) if not tracks or t.track in tracks]
    out = []
    with tempfile.TemporaryDirectory(prefix="bat-heldout-") as tmp:
        base = Path(workdir) if workdir else Path(tmp)
        for task in tasks:
            run_id = heldout_run_id(split, task.track, task.repeat)
            with bench.open(task, base / run_id) as env:
                play(env, bench.agent(task, agent))
                out.append(HeldoutResult(run_id, task.track, task.task_id, task.repeat, env.score()))
    return out
