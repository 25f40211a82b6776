"""One full scripted episode on a fresh instance (used by tests, the CLI and `bat bench sandbox`)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bat.benchmark.agents import Trajectory, outcome_of, run_agent
from bat.benchmark.env import StagedEnv
from bat.benchmark.instance import Instance, generate_instance
from bat.benchmark.judging import config_judge
from bat.benchmark.score import RunScore


@dataclass
class Episode:
    score: RunScore
    trajectory: Trajectory
    seconds: float
    instance: Instance


def run_instance(
    instance: Instance, agent: str, workdir: str | Path, config: Any = None, *, run_id: str = "", repeat: int = 0
) -> Episode:
    """Materialise `instance` under workdir/{workspace,grader}, run `agent`, grade; times the whole episode."""
    from bat.config.root import BatConfig

    cfg = config or BatConfig()
    root = Path(workdir)
    t0 = time.perf_counter()
    with StagedEnv(instance, root / "workspace", root / "grader", cfg) as env:
        env.reset()
        traj = run_agent(env, instance, agent)
    judge, judge_name = config_judge(cfg)
    score = env.score(run_id=run_id, repeat=repeat, judge=judge, judge_name=judge_name)
    traj.outcome = outcome_of(score)
    return Episode(score=score, trajectory=traj, seconds=time.perf_counter() - t0, instance=instance)


def run_episode(
    track: str, agent: str = "expert", *, space: str = "heldout", seed: int = 0, workdir: str | Path, config: Any = None
) -> Episode:
    """Generate the (track, space, seed) instance and run one full episode of `agent` on it."""
    from bat.config.root import BatConfig

    cfg = config or BatConfig()
    inst = generate_instance(track, space, seed, config=cfg.benchmark)
    return run_instance(inst, agent, workdir, cfg)
