"""Open the benchmark environment for one rollout of a Stage Bank row (through the bank's own helpers).

Workspace = a fresh, digest-checked copy of the row's state package p; grader side = rebuilt from the
practice task's seed outside the workspace; prefix execution records come from the bank's state dir; the opening
messages are the row's prompt or, under `rollout.state_context: history`, its teacher prefix as chat turns. A stage row
also gets its settled check (`stage_exit_check`), which the loop asks when `rollout.stage_exit` is on.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.rollout.runner import OpenedEnv, StateJob
from bat.schemas.bank import E2E

if TYPE_CHECKING:
    from bat.config.root import BatConfig
    from bat.schemas.bank import BankRow, PracticeTask


def grader_side(task: PracticeTask, config: BatConfig, workdir: Path) -> Path:
    """Grader dir regenerated from the practice task under `workdir` (never from rollout files)."""
    from bat.bank.practice import write_grader

    return write_grader(task, config, workdir)


def prior_records(state_dir: Path) -> list[Any]:
    """ExecutionRecords of the teacher prefix a state package was built from (empty for E2E rows)."""
    from bat.bank.replay import PRIOR_RECORDS
    from bat.sandbox import ExecutionRecord
    from bat.state.jsonl import read_jsonl

    path = Path(state_dir) / PRIOR_RECORDS
    return read_jsonl(path, ExecutionRecord) if path.exists() else []


def judged_ids(row: BankRow, config: BatConfig) -> set[str]:
    """Ids of the row's items the LLM judge decides (`verify.judge.enabled` and a judgment item of its stage)."""
    from bat.benchmark.contract import rubric

    if not config.verify.judge.enabled or row.stage == E2E:
        return set()
    wanted = {c.id for c in row.rubric}
    return {i.id for i in rubric(row.stage, row.track, config.benchmark.contract) if i.judgment and i.id in wanted}


def stage_exit_check(env: Any, row: BankRow, config: BatConfig) -> Callable[[int], bool] | None:
    """The row's settled check for the loop (`RolloutSpec.stage_exit`): calls left -> True when every rubric item
    and evidence id of the row is settled in `env` (`StagedEnv.settlement`); None for an E2E row. Evidence ids are
    settled on the records the verifier confirms them from (`verify.stage_evidence`: the rollout's own, once the
    state has a prefix), item ids on the whole trajectory."""
    if row.stage == E2E:
        return None
    items, evidence = [c.id for c in row.rubric], [g.id for g in row.evidence]
    judged = judged_ids(row, config)
    if config.verify.stage_evidence == "trajectory" or not getattr(env, "prior_records", None):
        return lambda horizon: env.settlement(items + evidence, horizon, judged=judged).settled
    return lambda horizon: (
        env.settlement(items, horizon, judged=judged).settled
        and env.settlement(evidence, horizon, judged=judged, own_records=True).settled
    )


def opening_messages(bank: Any, row: BankRow, config: BatConfig, bench: Any = None) -> list[dict[str, Any]]:
    """The messages a rollout of `row` opens with (`rollout.state_context`): the row's stored prompt, or for a
    stage row under `history` the SFT slice layout with the teacher prefix from the bank's trajectories (`bench`: a
    plug-in benchmark, whose preamble and skills open it)."""
    from bat.bank.rows import history_opening
    from bat.benchmark import prompts

    if config.rollout.state_context == "history" and row.stage != E2E:
        trajectory = bank.trajectory(row.provenance.trajectory_id)
        if bench is None:
            return prompts.to_dicts(history_opening(row, trajectory, config))
        stages = bench.stages()
        text = prompts.e2e_skill_text(
            [s.key for s in stages], {s.key: s.skill for s in stages}, {s.key: s.name for s in stages}
        )
        return prompts.to_dicts(history_opening(row, trajectory, config, agent_text=text, preamble=bench.preamble))
    return prompts.to_dicts(row.prompt)


def bank_opener(bank: Any, config: BatConfig):
    """`open_env(job, k, workdir)` for `run_shards` over rows of an opened bank version (job.payload = BankRow); a
    plug-in benchmark's rows open through the interface (`plugin_opener`)."""
    from bat.bank.rows import open_row_env

    if config.benchmark.name != "builtin":
        return plugin_opener(bank, config)

    def open_env(job: StateJob, k: int, workdir: Path) -> OpenedEnv:
        env = open_row_env(bank.path, job.payload, workdir, config)
        return OpenedEnv(
            env=env,
            workspace=env.workspace,
            messages=opening_messages(bank, job.payload, config),
            close=getattr(env, "close", None),
            stage_exit=stage_exit_check(env, job.payload, config),
        )

    return open_env


def plugin_opener(bank: Any, config: BatConfig):
    """`open_env(job, k, workdir)` over rows of a plug-in benchmark's bank version: the benchmark's environment
    restored at the row's stored stage state (`bat.bank.plugin_states.open_row`); stage rows are never cut early (a
    plug-in benchmark has no settled check)."""
    from bat.bank.plugin_states import benchmark, open_row

    bench = benchmark(config)

    def open_env(job: StateJob, k: int, workdir: Path) -> OpenedEnv:
        env = open_row(bench, bank.path, job.payload, workdir)
        return OpenedEnv(
            env=env,
            workspace=env.workspace,
            messages=opening_messages(bank, job.payload, config, bench),
            close=env.close,
        )

    return open_env
