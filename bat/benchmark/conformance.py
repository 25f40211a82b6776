"""Conformance of a staged benchmark to `bat.staged.interface` (what `bat benchmark check NAME` runs).

`check(bench, workdir)` returns one line per failure, each saying what is wrong and what to fix (empty: conforms):
the declaration (stages, weights, criteria, tracks, tools, the `expert` agent); tasks deterministic under a seed,
covering every track, held-out ones depending on the secret and never equal to a practice task; on one practice task
per track and the first held-out task: the expert earns full marks on every stage and enters every stage in order
(the Stage Bank starts a state at each stage's first expert turn), a no-op agent (no call) scores 0,
every turn (an invalid action included) is attributed to a stage, grading is deterministic, and a stage state
restored in a fresh environment equals the workspace it was taken from; the held-out fingerprints name every held-out
task id and no practice one.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from bat.staged.interface import (
    HELDOUT_SPLITS,
    PRACTICE,
    Benchmark,
    Score,
    Step,
    Task,
    play,
)

CHECK_SECRET = "c0" * 32
"""The held-out secret the check draws held-out tasks with (a stand-in: a run's own secret is never needed)."""
OTHER_SECRET = "5e" * 32
FINGERPRINT_KINDS = ("identifier", "path", "answer", "text", "field")


def _declaration(bench: Benchmark) -> list[str]:
    out = []
    stages = bench.stages()
    keys = [s.key for s in stages]
    if not stages:
        out.append("stages() is empty: declare at least one stage")
    if len(set(keys)) != len(keys):
        out.append(f"stage keys {keys} repeat: give every stage its own key")
    total = sum(s.weight for s in stages)
    if stages and abs(total - 1.0) > 1e-6:
        out.append(f"stage weights sum to {total:.6g}, not 1: rescale them ({ {s.key: s.weight for s in stages} })")
    ids = [c.id for s in stages for c in s.criteria]
    if len(set(ids)) != len(ids):
        out.append("criterion ids repeat across stages: make every criterion id unique")
    out += [f"stage {s.key!r} has no criteria: give it at least one rubric criterion" for s in stages if not s.criteria]
    tracks = bench.tracks()
    if not tracks or len(set(tracks)) != len(tracks):
        out.append(f"tracks() {list(tracks)} must be non-empty and unique")
    tools = bench.tools()
    names = [t.get("name") for t in tools]
    if not tools or len(set(names)) != len(names):
        out.append(f"tools() {names} must be non-empty with unique names")
    out += [
        f"tool {t.get('name')!r} lacks {sorted({'name', 'description', 'parameters'} - set(t))}"
        for t in tools
        if not {"name", "description", "parameters"} <= set(t)
    ]
    if "expert" not in bench.agents:
        out.append(f"agents {list(bench.agents)} lack 'expert': provide a scripted expert for every task")
    return out


def _ids(tasks: Sequence[Task]) -> list[tuple[str, str]]:
    return [(t.task_id, t.fingerprint) for t in tasks]


def _tasks(bench: Benchmark, seed: int, count: int) -> tuple[list[Task], list[Task], list[str]]:
    out = []
    practice = bench.tasks(PRACTICE, seed=seed, count=count)
    if _ids(practice) != _ids(bench.tasks(PRACTICE, seed=seed, count=count)):
        out.append("practice tasks differ between two calls with the same seed: derive them from the seed only")
    missing = sorted(set(bench.tracks()) - {t.track for t in practice})
    if missing:
        out.append(f"practice tasks cover no task of tracks {missing}: draw `count` tasks for every track")
    out += [f"task {t.task_id} has unknown track {t.track!r}" for t in practice if t.track not in bench.tracks()]
    heldout: list[Task] = []
    for split in HELDOUT_SPLITS:
        tasks = bench.tasks(split, seed=seed, count=count, secret=CHECK_SECRET)
        if not tasks:
            out.append(f"held-out split {split!r} has no tasks")
        if _ids(tasks) != _ids(bench.tasks(split, seed=seed, count=count, secret=CHECK_SECRET)):
            out.append(f"held-out {split!r} tasks differ between two calls: derive them from (seed, secret, split)")
        if _ids(tasks) == _ids(bench.tasks(split, seed=seed, count=count, secret=OTHER_SECRET)):
            out.append(f"held-out {split!r} tasks do not depend on the secret: derive them from the held-out secret")
        out += [f"task {t.task_id} on split {split!r} says split {t.split!r}" for t in tasks if t.split != split]
        heldout += tasks
    p_ids, p_fps = {t.task_id for t in practice}, {t.fingerprint for t in practice}
    clash = [t.task_id for t in heldout if t.task_id in p_ids or t.fingerprint in p_fps]
    if clash:
        out.append(f"held-out tasks {clash[:5]} equal practice tasks: draw them from disjoint seeds and identifiers")
    return practice, heldout, out


def _fresh(workdir: Path, name: str) -> Path:
    path = workdir / name
    shutil.rmtree(path, ignore_errors=True)
    return path


def _run(bench: Benchmark, task: Task, workdir: Path, agent: str | None, turns: int = 1000) -> tuple[list[Step], Score]:
    with bench.open(task, workdir) as env:
        steps = play(env, bench.agent(task, agent) if agent else (lambda _obs: None), turns)
        return steps, env.score()


def _episodes(bench: Benchmark, task: Task, workdir: Path) -> list[str]:
    out, keys, where = [], [s.key for s in bench.stages()], f"task {task.task_id} ({task.split}, {task.track})"
    steps, score = _run(bench, task, _fresh(workdir, "expert"), "expert")
    off = sorted({s.stage for s in steps} - set(keys))
    if off:
        out.append(f"{where}: turns attributed to {off}, not a stage of {keys}: tag every turn with a stage key")
    else:
        visited = list(dict.fromkeys(s.stage for s in steps))
        if visited != keys:
            out.append(
                f"{where}: the expert's turns go through stages {visited}, not {keys} in order: the Stage Bank starts "
                "a state at each stage's first expert turn, so the expert must enter every stage, in order"
            )
    for key in keys:
        value = score.stages.get(key, "absent")
        if value != 1.0:
            failing = sorted(i for i, v in score.items.get(key, {}).items() if v is not True)
            out.append(
                f"{where}: the expert scores stage {key!r} {value}, not 1.0 (criteria not earned: {failing}): "
                "make the expert earn every criterion, or fix the grader"
            )
    _, again = _run(bench, task, _fresh(workdir, "expert2"), "expert")
    if again.summary() != score.summary():
        out.append(f"{where}: two expert runs grade differently: make tools and grading deterministic")
    _, noop = _run(bench, task, _fresh(workdir, "noop"), None)
    nonzero = {k: v for k, v in noop.stages.items() if v != 0.0}
    if noop.overall != 0.0 or nonzero:
        out.append(
            f"{where}: a no-op agent (no call) scores Overall {noop.overall} with stages {nonzero}: "
            "a stage must score 0 when nothing was done"
        )
    with bench.open(task, _fresh(workdir, "invalid")) as env:
        env.reset()
        bad = env.step({"invalid": True, "reason": "conformance", "detail": "no tool call"})
        unknown = env.step({"name": "__no_such_tool__", "arguments": {}})
    for label, step in (("an invalid action", bad), ("an unknown tool", unknown)):
        if step.ok or step.stage not in keys:
            out.append(f"{where}: {label} gave ok={step.ok}, stage {step.stage!r}: answer with an error, tagged")
    out += _restore(bench, task, workdir, len(steps) // 2, where)
    return out


def _restore(bench: Benchmark, task: Task, workdir: Path, turns: int, where: str) -> list[str]:
    with bench.open(task, _fresh(workdir, "prefix")) as env:
        play(env, bench.agent(task, "expert"), turns)
        state, before = env.snapshot(), env.state()
    if state.stage != before.stage:
        out = [f"{where}: snapshot() says stage {state.stage!r}, state() says {before.stage!r}: make them agree"]
    else:
        out = []
    with bench.open(task, _fresh(workdir, "restored"), state=state) as env:
        env.reset()
        restored = env.snapshot()
    if restored.digest() != state.digest():
        differ = sorted(set(state.files) ^ set(restored.files)) or sorted(
            p for p in state.files if state.files[p] != restored.files.get(p)
        )
        out.append(f"{where}: the restored workspace differs from the stage state in {differ[:5]}: restore every file")
    if restored.stage != state.stage:
        out.append(f"{where}: restored at stage {restored.stage!r}, taken at {state.stage!r}: restore the prefix")
    return out


def _fingerprints(bench: Benchmark, seed: int, practice: list[Task], heldout: list[Task]) -> list[str]:
    entries = bench.fingerprints(CHECK_SECRET, seed=seed)
    out = [
        f"fingerprint {e} needs kind in {list(FINGERPRINT_KINDS)} and a non-empty value and source"
        for e in entries
        if e.get("kind") not in FINGERPRINT_KINDS or not e.get("value") or not e.get("source")
    ][:3]
    values = {e.get("value") for e in entries}
    missing = sorted({t.task_id for t in heldout} - values)
    if missing:
        out.append(f"fingerprints lack held-out task ids {missing[:5]}: export every held-out task id as identifier")
    leaked = sorted({t.task_id for t in practice} & values)
    if leaked:
        out.append(f"fingerprints name practice task ids {leaked[:5]}: export held-out content only")
    return out


def check(bench: Benchmark, workdir: str | Path, *, seed: int = 7, count: int = 1) -> list[str]:
    """Every conformance failure of `bench` (one line each, with what to fix); episodes run under `workdir`."""
    out = _declaration(bench)
    if out:
        return out
    root = Path(workdir)
    practice, heldout, problems = _tasks(bench, seed, count)
    out += problems
    first = {}
    for task in practice:
        first.setdefault(task.track, task)
    for task in [*first.values(), *heldout[:1]]:
        out += _episodes(bench, task, root / task.task_id)
    out += _fingerprints(bench, seed, practice, heldout)
    return out
