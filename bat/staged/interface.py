"""The public interface of a staged benchmark: what bat needs from a benchmark to train on it and evaluate with it.

A benchmark author writes two classes against this module and nothing else from bat:

* a `Benchmark` (like a verifiers environment + rubric): its ordered `stages()` with weights and rubric criteria,
  its `tracks()`, its `tools()` (JSON schemas), `tasks(split, seed=..., secret=...)` (practice tasks from a seed;
  held-out tasks from the held-out secret, never equal to practice ones), `open(task, workdir, state=None)` (an
  environment, optionally restored at a stage state), `agent(task, name)` (scripted teacher agents: `expert` at
  least) and `fingerprints(secret, seed)` (held-out content for the leakage scan);
* an `Environment` (like Gymnasium's / OpenEnv's reset/step/state): `reset() -> str` (the first observation),
  `step(action) -> Step` (every turn attributed to one stage key), `state() -> EnvState`, `snapshot() -> StageState`
  (the workspace and the prefix it came from) and `score() -> Score` (per-stage rubric, task metric, Overall).

Scores are on 0-1 and unrounded; `None` means null (e.g. a judge was down): a null criterion makes its stage null,
a null stage makes Agentic and Overall null, never 0. Overall = 0.5 Task + 0.5 Agentic, Agentic the stage-weighted
mean over the applicable stages (`score_from_items` computes all of it from criterion verdicts).

Benchmarks are found by name (`bat.staged.registry`): the Python entry-point group `bat.benchmarks`, so a package
adds one with `pip install`; a test or a notebook can also `register(name, factory)` in-process. A factory is a
callable `factory(config) -> Benchmark` (`config` is bat's config object or None for defaults). `bat benchmark check
NAME` runs the conformance checks (`bat.benchmark.conformance`). See docs/byo-benchmark.md.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PRACTICE = "practice"
"""The split of practice tasks (the Stage Bank's); drawn from the practice seed."""
HELDOUT_SPLITS = ("controller", "final", "test")
"""Held-out splits: the controller routes on `controller`; `final` and `test` are reported; all from the secret."""
SPLITS = (PRACTICE, *HELDOUT_SPLITS)

Action = Mapping[str, Any]
"""A tool call `{"name": str, "arguments": {...}}`, or an invalid action `{"invalid": True, "reason": str}`. A scripted
agent's action may also carry `"thought"` (its text before the call, kept in transcripts); environments ignore it."""
Agent = Callable[[str], "Action | None"]
"""A scripted agent: given the last observation, the next action, or None to stop."""


@dataclass(frozen=True)
class Criterion:
    """One binary rubric criterion of a stage: `id` (unique in the benchmark), the `text` a judge or a reader sees,
    and whether it needs judgment (`judgment`: decided by an LLM judge when one is configured)."""

    id: str
    text: str
    judgment: bool = False


@dataclass(frozen=True)
class Stage:
    """One ordered stage: `key` (what rows, turns and reports carry), display `name`, Agentic `weight` (the
    benchmark's weights sum to 1), rubric `criteria`, and the public `skill` text (kappa) shown to agents."""

    key: str
    name: str
    weight: float
    criteria: tuple[Criterion, ...]
    skill: str = ""


@dataclass(frozen=True)
class Task:
    """One task instance. `task_id` names it, `fingerprint` is a digest of its content (two tasks with equal content
    have equal fingerprints), `split` is `practice` or a held-out split, `repeat` the held-out repeat index.
    `data` is the benchmark's own (hidden truth included): bat never reads it, only hands it back."""

    task_id: str
    track: str
    split: str
    seed: int
    fingerprint: str
    repeat: int = 0
    data: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Step:
    """The result of one `Environment.step`: the observation text, the stage key the turn is attributed to, whether
    the call succeeded, whether the episode ended, and the benchmark's record of the call (`info`, JSON-able)."""

    observation: str
    stage: str
    ok: bool
    done: bool
    info: Mapping[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The observation under the name bat's agent loop reads (`bat.rollout.spec.Env`)."""
        return self.observation

    @property
    def record(self) -> Mapping[str, Any]:
        """The call's record under the name bat's agent loop reads."""
        return self.info


@dataclass(frozen=True)
class EnvState:
    """OpenEnv-style episode state: the task, the current stage, the turns taken so far and whether it ended."""

    task_id: str
    stage: str
    turns: int
    done: bool


@dataclass(frozen=True)
class StageState:
    """A stage state (Eq. 11): the workspace files (relative path -> bytes) after a prefix of turns, the stage the
    next turn starts in, and the prefix's records (`prior`, JSON-able, what grading needs of the upstream turns).
    `Benchmark.open(task, workdir, state=...)` restores it; the restored workspace must equal `files` exactly."""

    task_id: str
    stage: str
    files: Mapping[str, bytes]
    prior: tuple[Mapping[str, Any], ...] = ()

    def digest(self) -> str:
        """sha256 over the sorted (path, content) pairs: equal workspaces have equal digests."""
        h = hashlib.sha256()
        for path in sorted(self.files):
            h.update(path.encode("utf-8") + b"\0" + hashlib.sha256(self.files[path]).digest())
        return h.hexdigest()


@dataclass(frozen=True)
class Score:
    """A graded run. `stages`: stage key -> score (a stage with no applicable criterion is absent: not applicable);
    `items`: stage key -> criterion id -> verdict (None = null); `task`: the task metric; `agentic`, `overall` as in
    the module docstring; `valid` is False when anything is null; `details` is the benchmark's own (e.g. its native
    score record)."""

    stages: Mapping[str, float | None]
    items: Mapping[str, Mapping[str, bool | None]]
    task: float | None
    agentic: float | None
    overall: float | None
    task_metrics: Mapping[str, float] = field(default_factory=dict)
    valid: bool = True
    breach: bool = False
    """The run broke the benchmark's rules (e.g. read the grader side): Overall is 0."""
    null_reasons: tuple[str, ...] = ()
    """Why something is null (reported with the run, never scored as 0)."""
    details: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def summary(self) -> dict[str, Any]:
        """The JSON-able part that decides equality (stages, items, task, agentic, overall, validity)."""
        return {
            "stages": dict(self.stages),
            "items": {k: dict(v) for k, v in self.items.items()},
            "task": self.task,
            "agentic": self.agentic,
            "overall": self.overall,
            "valid": self.valid,
            "breach": self.breach,
        }


def agentic_score(stage_scores: Mapping[str, float | None], stages: Sequence[Stage]) -> float | None:
    """Weighted mean of the applicable stages (absent ones dropped, weights renormalised); None if any is null."""
    used = [s for s in stages if s.key in stage_scores]
    if not used or any(stage_scores[s.key] is None for s in used):
        return None
    return sum(s.weight * float(stage_scores[s.key]) for s in used) / sum(s.weight for s in used)  # type: ignore[arg-type]


def overall_score(task: float | None, agentic: float | None) -> float | None:
    """Overall = 0.5 Task + 0.5 Agentic; None when either is null."""
    return None if task is None or agentic is None else 0.5 * task + 0.5 * agentic


def score_from_items(
    stages: Sequence[Stage],
    items: Mapping[str, Mapping[str, bool | None]],
    task: float | None,
    task_metrics: Mapping[str, float] | None = None,
    details: Mapping[str, Any] | None = None,
) -> Score:
    """A `Score` whose stage scores are the mean of their criterion verdicts (a stage whose verdicts are empty is
    not applicable; one null verdict makes the stage null), Agentic and Overall as in the module docstring."""
    stage_scores: dict[str, float | None] = {}
    for stage in stages:
        verdicts = items.get(stage.key, {})
        if verdicts:
            nulls = any(v is None for v in verdicts.values())
            stage_scores[stage.key] = None if nulls else sum(map(bool, verdicts.values())) / len(verdicts)
    agentic = agentic_score(stage_scores, stages)
    overall = overall_score(task, agentic)
    return Score(
        stages=stage_scores,
        items={k: dict(v) for k, v in items.items()},
        task=task,
        agentic=agentic,
        overall=overall,
        task_metrics=dict(task_metrics or {}),
        valid=overall is not None,
        details=dict(details or {}),
    )


def content_digest(value: Any) -> str:
    """sha256 of a JSON-able value's canonical JSON (sorted keys): a `Task.fingerprint` for JSON-able task content."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def seed_from(*parts: Any) -> int:
    """A 63-bit seed from the canonical JSON of `parts` (e.g. the held-out secret, the split, the track, an index)."""
    return int(content_digest([str(p) for p in parts])[:16], 16) >> 1


def read_tree(root: str | Path) -> dict[str, bytes]:
    """Every regular file under `root` as relative POSIX path -> bytes (what a `StageState` holds)."""
    base = Path(root)
    return {p.relative_to(base).as_posix(): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}


def write_tree(root: str | Path, files: Mapping[str, bytes]) -> Path:
    """Write `files` (relative path -> bytes) under `root`, which must not hold anything else; returns `root`."""
    base = Path(root)
    base.mkdir(parents=True, exist_ok=True)
    if any(base.iterdir()):
        raise FileExistsError(f"{base}: a restored workspace must start empty")
    for rel, content in files.items():
        target = base / rel
        if ".." in Path(rel).parts or Path(rel).is_absolute():
            raise ValueError(f"{rel!r}: a state file path must stay inside the workspace")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    return base


class Environment(ABC):
    """One episode on one task (call `close()` or use `with`). `workspace` is the agent-visible directory, if the
    benchmark has one (bat records which files each turn wrote there)."""

    workspace: Path | None = None

    @abstractmethod
    def reset(self) -> str:
        """Start the episode (fresh workspace, or the restored stage state); returns the first observation."""

    @abstractmethod
    def step(self, action: Action) -> Step:
        """Run one action; a malformed or unknown call gives an error observation (`ok=False`), never an exception.
        The returned `Step.stage` is one of the benchmark's stage keys."""

    @abstractmethod
    def state(self) -> EnvState:
        """The episode's state (task, current stage, turns so far, done)."""

    @abstractmethod
    def snapshot(self) -> StageState:
        """The stage state at this point: the workspace's files and the records of the turns so far."""

    @abstractmethod
    def score(self) -> Score:
        """Grade the episode so far (per-stage rubric, task metric, Agentic, Overall)."""

    def close(self) -> None:
        """Release what the episode holds (processes, servers); the default holds nothing."""
        return None

    def __enter__(self) -> Environment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Benchmark(ABC):
    """A staged benchmark: its name, stages, tracks, tools, tasks, environments, teacher agents, fingerprints."""

    name: str = ""
    version: str = ""
    """Changes whenever tasks or tools change (recorded with every result)."""
    harness_version: str = ""
    """Changes whenever grading changes; empty: `version` covers grading too."""
    preamble: str = (
        "You are a careful agent working in a sandboxed workspace. Work through the public stages in order, call "
        "exactly one tool per turn, and read each tool result before the next step."
    )
    """The opening of the agent's system turn, before the stage skills."""
    agents: tuple[str, ...] = ("expert",)
    """Scripted agents `agent()` accepts; `expert` (full marks on every stage) is required, `recovery` and `failure`
    (teacher variants for the Stage Bank's recovery and failure states) are optional."""

    @abstractmethod
    def stages(self) -> tuple[Stage, ...]:
        """The ordered stages (weights sum to 1)."""

    @abstractmethod
    def tracks(self) -> tuple[str, ...]:
        """Track names (task families); every `Task.track` is one of them."""

    @abstractmethod
    def tools(self) -> list[dict[str, Any]]:
        """Tool schemas offered to agents: `{"name", "description", "parameters": <JSON schema>}`."""

    @abstractmethod
    def tasks(self, split: str, *, seed: int, count: int | None = None, secret: str | None = None) -> list[Task]:
        """Tasks of `split` (`practice` or one of `HELDOUT_SPLITS`), `count` per track (None: the benchmark's
        default). Practice tasks derive from `seed` alone; held-out ones also from `secret` (the run's held-out
        secret, required for them), so nothing with only the config and the code can rebuild them. The same
        arguments give equal tasks; no held-out task equals (task id or fingerprint) a practice task."""

    @abstractmethod
    def open(self, task: Task, workdir: str | Path, *, state: StageState | None = None) -> Environment:
        """An environment on `task` under `workdir` (the agent-visible workspace and the hidden grader side both
        live there, the grader side outside the workspace), restored at `state` when given. Call `reset()` next."""

    @abstractmethod
    def agent(self, task: Task, name: str = "expert") -> Agent:
        """A fresh scripted agent `name` (one of `agents`) for `task`; it may read `task.data` (privileged)."""

    @abstractmethod
    def fingerprints(self, secret: str, *, seed: int) -> list[dict[str, str]]:
        """Held-out content for the leakage index: `{"kind", "value", "source"}` with kind one of identifier, path,
        answer, text, field. Nothing else of the held-out side reaches training."""

    def surrogate(self, task: Task, fraction: float) -> Task:
        """A reduced practice task (the E2E surrogate of Eq. 12) keeping `fraction` of the input; the default knows
        only the whole task."""
        if fraction != 1.0:
            raise ValueError(f"{self.name}: no reduced tasks; valid fraction: 1.0, got {fraction}")
        return task

    def describe(self) -> dict[str, Any]:
        """`{"name", "version", "stages": [keys], "tracks": [...]}` (what `bat benchmark list --json` prints)."""
        return {
            "name": self.name,
            "version": self.version,
            "stages": [s.key for s in self.stages()],
            "tracks": list(self.tracks()),
        }


def play(env: Environment, agent: Agent, max_turns: int = 1000) -> list[Step]:
    """Reset `env` and drive `agent` until it stops, the episode ends or `max_turns` turns; returns the steps."""
    observation, steps = env.reset(), []
    while len(steps) < max_turns:
        action = agent(observation)
        if action is None:
            break
        step = env.step(action)
        steps.append(step)
        observation = step.observation
        if step.done:
            break
    return steps
