"""Stage states of a plug-in benchmark (Eq. 11 through `bat.staged.interface`): practice tasks named by a bank
`PracticeTask`, prefix replay to `StageState` snapshots, their packages in a bank version, and an environment opened
on a stored row.

A plug-in bank task is drawn with `bench.tasks("practice", seed=task.seed, count=1)` (one task per track; the
task's track picks it), so every phase rebuilds the same task from the bank record alone (the interface promises
equal tasks for equal arguments). A stage state is `Environment.snapshot()` after a replayed prefix; its package
holds the workspace files (`bat.sandbox` package format) and the prefix's records (`prior_records.jsonl`), which
`Benchmark.open(task, workdir, state=...)` restores. Practice tasks only: nothing here asks for the held-out secret.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.staged.interface import PRACTICE, Benchmark, Environment, StageState, Task, read_tree, write_tree
from bat.state.bank_layout import PRIOR_RECORDS_NAME
from bat.state.jsonl import read_jsonl, write_jsonl

if TYPE_CHECKING:
    from bat.config.root import BatConfig
    from bat.schemas.bank import BankRow, PracticeTask, TrajectoryTurn

WORKDIR_ALIAS = "<workdir>"


def benchmark(config: BatConfig) -> Benchmark:
    """The configured benchmark from the registry (`bat.staged.registry.from_config`)."""
    from bat.staged.registry import from_config

    return from_config(config)


@lru_cache(maxsize=256)
def _drawn(bench: Benchmark, seed: int) -> tuple[Task, ...]:
    return tuple(bench.tasks(PRACTICE, seed=seed, count=1))


def draw(bench: Benchmark, track: str, seed: int) -> Task:
    """The practice task of `track` drawn from `seed` (`bench.tasks(practice, seed=seed, count=1)`); a benchmark
    that draws none for the track raises, naming the tracks it drew."""
    found = [t for t in _drawn(bench, seed) if t.track == track]
    if not found:
        drawn = sorted({t.track for t in _drawn(bench, seed)})
        raise ValueError(f"{bench.name}: no practice task of track {track!r} from seed {seed}; drawn tracks: {drawn}")
    return found[0]


def task_of(bench: Benchmark, practice: PracticeTask) -> Task:
    """The benchmark task a bank `PracticeTask` names (its track drawn from its seed)."""
    return draw(bench, practice.track, practice.seed)


def action_of(turn: TrajectoryTurn) -> dict[str, Any]:
    """The action a recorded turn took: its call, or an invalid action naming why."""
    if turn.call is not None:
        return dict(turn.call)
    return {"invalid": True, "reason": "not a tool call"}


def alias(value: Any, workdir: Path) -> Any:
    """`value` (str or JSON-able) with the host path of `workdir` replaced by `WORKDIR_ALIAS` (machine-free bytes)."""
    import json

    text = json.dumps(value, sort_keys=True)
    for real in dict.fromkeys((str(Path(workdir).resolve()), str(workdir))):
        text = text.replace(json.dumps(real)[1:-1], WORKDIR_ALIAS)
    return json.loads(text)


class ReplayMismatchError(RuntimeError):
    """A replayed action gave another observation than the teacher saw (the benchmark is not deterministic)."""


def replay_states(
    bench: Benchmark, task: Task, turns: Sequence[TrajectoryTurn], boundaries: Mapping[str, int], workdir: Path
) -> dict[str, StageState]:
    """Replay the turns' actions once in a fresh environment on `task` under `workdir` and snapshot it at every
    boundary `key -> b` (after turns[:b]); raises ReplayMismatchError when an observation differs from the
    recorded one, ValueError for a boundary outside the trajectory."""
    for key, b in boundaries.items():
        if not 0 <= b <= len(turns):
            raise ValueError(f"boundary {key}={b} outside the trajectory (0..{len(turns)})")
    out: dict[str, StageState] = {}
    last = max(boundaries.values(), default=0)
    shutil.rmtree(workdir, ignore_errors=True)
    with bench.open(task, workdir) as env:
        env.reset()
        for t in range(last + 1):
            for key in sorted(k for k, b in boundaries.items() if b == t):
                out[key] = env.snapshot()
            if t == last:
                break
            step = env.step(action_of(turns[t]))
            seen = alias(step.observation, workdir)
            if seen != turns[t].observation:
                raise ReplayMismatchError(
                    f"{bench.name}: replay of turn {t} of {task.task_id} diverged from the teacher's observation:\n"
                    f"teacher: {turns[t].observation[:300]!r}\nreplay:  {seen[:300]!r}"
                )
    shutil.rmtree(workdir, ignore_errors=True)
    return out


def pack_state(state: StageState, dest: Path, metadata: dict[str, Any]) -> Any:
    """Write `state` as a state package at `dest` (its files; its prefix records beside them); returns the
    package manifest (`bat.sandbox.PackageManifest`)."""
    from bat.bank.states import pack_workspace

    with tempfile.TemporaryDirectory(prefix="bat-state-") as tmp:
        manifest = pack_workspace(write_tree(Path(tmp) / "files", state.files), dest, metadata)
    write_jsonl(Path(dest) / PRIOR_RECORDS_NAME, [dict(r) for r in state.prior])
    return manifest


def load_state(state_dir: Path, task_id: str, stage: str) -> StageState:
    """The `StageState` a package holds (digest-checked: a changed file raises `StateDigestError`)."""
    from bat.bank.states import verify_package
    from bat.sandbox.package import package_files

    verify_package(state_dir)
    prior_path = Path(state_dir) / PRIOR_RECORDS_NAME
    prior = tuple(read_jsonl(prior_path)) if prior_path.exists() else ()
    return StageState(task_id, stage, read_tree(package_files(state_dir)), prior)


def open_row(bench: Benchmark, bank_dir: Path, row: BankRow, workdir: Path) -> Environment:
    """The benchmark's environment on the row's practice task under `workdir`, restored at the row's stored
    stage state (an E2E row's state is the fresh workspace). Call `reset()` next."""
    task = task_of(bench, row.task)
    state = load_state(Path(bank_dir) / row.state.path, task.task_id, row.stage)
    return bench.open(task, workdir, state=state)
