"""The built-in offline benchmark (7 synthetic medical-imaging tracks, S1-S5) as a plug-in of
`bat.staged.interface`: an adapter over `StagedEnv`, the suite, the scripted agents and the fingerprint export.

It calls the same generators, environment and grader as before with the same seeds, so tasks, bank digests and
scores are unchanged: practice task i of a track is `practice_instance(track, practice_seed(track, i))` when `seed` is
`benchmark.practice_seed`, held-out tasks are `heldout_suite(...)` runs when `seed` is `benchmark.heldout_seed`.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

from bat.staged.interface import (
    HELDOUT_SPLITS,
    PRACTICE,
    SPLITS,
    Action,
    Agent,
    Benchmark,
    Criterion,
    Environment,
    EnvState,
    Score,
    Stage,
    StageState,
    Step,
    Task,
    read_tree,
    write_tree,
)


def _config(config: Any) -> Any:
    from bat.config.root import BatConfig

    return config if config is not None else BatConfig()


def _with_seed(config: Any, field: str, seed: int) -> Any:
    return config.model_copy(update={"benchmark": config.benchmark.model_copy(update={field: seed})})


def instance_fingerprint(instance: Any) -> str:
    """sha256 over the instance's track and every workspace file (path and bytes)."""
    h = hashlib.sha256(instance.track.encode("utf-8"))
    for path in sorted(instance.files):
        h.update(b"\0" + path.encode("utf-8") + b"\0" + hashlib.sha256(instance.files[path]).digest())
    return h.hexdigest()


class BuiltinEnv(Environment):
    """`StagedEnv` behind the interface: workspace at `workdir/workspace`, grader side at `workdir/grader`."""

    def __init__(self, config: Any, task: Task, workdir: str | Path, state: StageState | None) -> None:
        self.config, self.task, self.restore_from = config, task, state
        self.workdir = Path(workdir)
        self.workspace, self.grader = self.workdir / "workspace", self.workdir / "grader"
        self.env: Any = None

    def reset(self) -> str:
        """A fresh instance workspace, or the stage state's files with its prefix records as prior records."""
        from bat.benchmark.env import StagedEnv
        from bat.benchmark.instance import materialize
        from bat.sandbox.record import ExecutionRecord

        self.close()
        if self.restore_from is None:
            self.env = StagedEnv(self.task.data, self.workspace, self.grader, self.config)
            return self.env.reset()
        scratch = self.workdir / "scratch"
        materialize(self.task.data, scratch, self.grader)
        shutil.rmtree(scratch)
        shutil.rmtree(self.workspace, ignore_errors=True)
        write_tree(self.workspace, self.restore_from.files)
        prior = [ExecutionRecord.model_validate(r) for r in self.restore_from.prior]
        self.env = StagedEnv(None, self.workspace, self.grader, self.config, prior_records=prior)
        return self.env.reset()

    def step(self, action: Action) -> Step:
        obs = self.env.step({k: v for k, v in action.items() if k != "thought"})
        rec = obs.record
        return Step(obs.text, rec.stage or self.env.current_stage(), rec.ok, obs.done, rec.model_dump(mode="json"))

    def state(self) -> EnvState:
        return EnvState(self.task.task_id, self.env.current_stage(), len(self.env.records), self.env.done)

    def snapshot(self) -> StageState:
        prior = tuple(r.model_dump(mode="json") for r in self.env.all_records)
        return StageState(self.task.task_id, self.env.current_stage(), read_tree(self.workspace), prior)

    def score(self) -> Score:
        """The built-in grader's `RunScore` (judge from `verify.judge`), kept whole in `details["run_score"]`."""
        from bat.benchmark.judging import config_judge

        judge, judge_name = config_judge(self.config)
        rs = self.env.score(run_id=self.task.task_id, repeat=self.task.repeat, judge=judge, judge_name=judge_name)
        return Score(
            stages=rs.stages,
            items=rs.items,
            task=rs.task,
            agentic=rs.agentic,
            overall=rs.overall,
            task_metrics=rs.task_metrics,
            valid=rs.valid,
            breach=rs.breach,
            null_reasons=tuple(rs.null_reasons),
            details={"run_score": rs},
        )

    def close(self) -> None:
        if self.env is not None:
            self.env.close()


class _ScriptAgent:
    """A built-in scripted agent (a generator over `Observation`s) as an interface `Agent` over observation text."""

    class _Seen:
        def __init__(self, text: str) -> None:
            self.text = text

    def __init__(self, script: Any) -> None:
        self.script, self.started = script, False

    def __call__(self, observation: str) -> Action | None:
        try:
            if not self.started:
                self.started = True
                thought, call = next(self.script)
            else:
                thought, call = self.script.send(self._Seen(observation))
        except StopIteration:
            return None
        return {**call, "thought": thought}


class BuiltinBenchmark(Benchmark):
    """The built-in offline benchmark; `config` is a `BatConfig` (None: defaults)."""

    name = "builtin"
    agents = ("expert", "noop", "skip-validate", "recovery", "failure")

    def __init__(self, config: Any = None) -> None:
        from bat.benchmark import HARNESS_VERSION, SUITE_VERSION
        from bat.benchmark.prompts import PREAMBLE

        self.config = _config(config)
        self.version, self.harness_version, self.preamble = SUITE_VERSION, HARNESS_VERSION, PREAMBLE

    def stages(self) -> tuple[Stage, ...]:
        from bat.benchmark.contract import STAGE_SKILLS, rubric

        contract = self.config.benchmark.contract
        return tuple(
            Stage(
                s.key,
                s.name,
                s.weight,
                tuple(Criterion(i.id, i.text, i.judgment) for i in rubric(s.key, "{track}", contract)),
                STAGE_SKILLS.get(s.key, ""),
            )
            for s in self.config.stages
        )

    def tracks(self) -> tuple[str, ...]:
        return tuple(self.config.benchmark.tracks)

    def tools(self) -> list[dict[str, Any]]:
        """`TOOL_SPECS`, the tools the policy is shown in SFT rows, rollouts and evaluation (`execute_code`, when
        `benchmark.execute_code`, is accepted by the environment without being listed, as before)."""
        from bat.benchmark.tools.specs import TOOL_SPECS

        return [dict(t) for t in TOOL_SPECS]

    def tasks(self, split: str, *, seed: int, count: int | None = None, secret: str | None = None) -> list[Task]:
        """Practice: `count` (default `benchmark.repeats`) instances per track from `seed`; held-out: the suite's runs
        of `split` (at most `count` repeats per track) under `secret`."""
        from bat.benchmark.secret import HeldoutSecret
        from bat.benchmark.suite import heldout_suite, practice_instance, suite_instance
        from bat.seeds import derive_seed

        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; valid: {list(SPLITS)}")
        if split == PRACTICE:
            out = []
            for track in self.tracks():
                for index in range(self.config.benchmark.repeats if count is None else count):
                    task_seed = derive_seed(seed, "practice", track, index)
                    inst = practice_instance(track, task_seed, self.config)
                    out.append(Task(inst.instance_id, track, PRACTICE, task_seed, instance_fingerprint(inst), 0, inst))
            return out
        if not secret:
            raise ValueError(f"held-out split {split!r} needs the held-out secret")
        cfg = _with_seed(self.config, "heldout_seed", seed)
        runs = [r for r in heldout_suite(cfg, split, secret=HeldoutSecret(secret)) if count is None or r.repeat < count]
        tasks = []
        for run in runs:
            inst = suite_instance(run, cfg)
            fp = instance_fingerprint(inst)
            tasks.append(Task(inst.instance_id, run.track, split, run.instance_seed, fp, run.repeat, inst))
        return tasks

    def open(self, task: Task, workdir: str | Path, *, state: StageState | None = None) -> Environment:
        return BuiltinEnv(self.config, task, workdir, state)

    def agent(self, task: Task, name: str = "expert") -> Agent:
        from bat.benchmark.agents import SCRIPTS

        if name not in SCRIPTS:
            raise ValueError(f"unknown agent {name!r}; valid: {list(self.agents)}")
        return _ScriptAgent(SCRIPTS[name](task.data))

    def fingerprints(self, secret: str, *, seed: int) -> list[dict[str, str]]:
        from bat.benchmark.secret import HeldoutSecret
        from bat.benchmark.suite import fingerprint_entries

        return fingerprint_entries(_with_seed(self.config, "heldout_seed", seed), secret=HeldoutSecret(secret))

    def surrogate(self, task: Task, fraction: float) -> Task:
        """The practice instance of `task` with every case's input capped at `fraction` (`input_fraction`)."""
        from bat.benchmark.suite import practice_instance

        if task.split != PRACTICE:
            raise ValueError(f"surrogates are practice tasks only; {task.task_id} is on split {task.split!r}")
        inst = practice_instance(task.track, task.seed, self.config, input_fraction=fraction)
        return Task(inst.instance_id, task.track, PRACTICE, task.seed, instance_fingerprint(inst), 0, inst)


__all__ = ["HELDOUT_SPLITS", "BuiltinBenchmark", "BuiltinEnv", "instance_fingerprint"]
