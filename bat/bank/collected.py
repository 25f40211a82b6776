"""What one bank synthesis collects (tasks, trajectories, rows, E2E decisions) and how it is written into a version's
build directory, for the built-in bank (`bat.bank.synthesize`) and plug-in banks (`bat.bank.plugin_synth`).

Reads: task results; the leakage index (the E2E leak term). Writes: a version's files under its build directory.
"""

from __future__ import annotations

import shutil
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.bank import e2e, sft
from bat.bank.pools import build_index
from bat.bank.skills import write_skills_file
from bat.bank.tasks import TaskResult
from bat.schemas.bank import E2E, BankRow, PracticeTask, SftRow, Trajectory
from bat.state.atomic import atomic_write_json
from bat.state.bank_layout import SFT_SPLIT_FILES, BankVersionLayout
from bat.state.jsonl import write_jsonl

if TYPE_CHECKING:
    from bat.config.root import BatConfig
    from bat.state.layout import RunLayout


@dataclass
class Collected:
    """Everything one synthesis pass produces before it is written."""

    tasks: list[PracticeTask] = field(default_factory=list)
    trajectories: list[Trajectory] = field(default_factory=list)
    e2e_trajectory_ids: set[str] = field(default_factory=set)
    rows: list[BankRow] = field(default_factory=list)
    unchecked: Counter = field(default_factory=Counter)
    e2e: dict[str, Any] = field(
        default_factory=lambda: {"candidates": 0, "accepted": 0, "rejected_by_reason": Counter(), "decisions": {}}
    )
    writer: dict[str, Any] | None = None
    """The LLM task writer's counts (`TaskWriter.counts`); None for scripted tasks."""

    def add(self, result: TaskResult, build: Path, scanner: Any | None) -> None:
        """Merge one task's result (in task order); E2E candidates get the leak term of Eq. 15 here."""
        traj = result.trajectory
        verdict = result.acceptance
        if verdict is not None:
            self.e2e["candidates"] += 1
            if verdict.accepted and scanner is not None:
                e2e.check_leak(verdict, result.rows[0], scanner)
                if not verdict.accepted:
                    shutil.rmtree(build / result.rows[0].state.path, ignore_errors=True)
                    result.rows = []
                    traj = traj.model_copy(update={"checked": False, "check_failures": list(verdict.reasons)})
            self.e2e["decisions"][f"{traj.task.task_id}.{E2E}"] = verdict.as_dict()
            if verdict.accepted:
                self.e2e["accepted"] += 1
                self.e2e_trajectory_ids.add(traj.trajectory_id)
            for reason in verdict.reasons:
                self.e2e["rejected_by_reason"][reason.split(":")[0]] += 1
        elif not traj.checked:
            self.unchecked[traj.outcome] += 1
        self.trajectories.append(traj)
        self.rows.extend(result.rows)


def leak_scanner(config: BatConfig, layout: RunLayout) -> Any | None:
    if not config.leakage.enabled:
        return None
    from bat.leakage.preflight import ensure_index
    from bat.leakage.scanner import Scanner

    return Scanner(ensure_index(layout, config))


def bank_counts(config: BatConfig, out: Collected, sft_rows: list[SftRow], stats: sft.SliceStats) -> dict[str, Any]:
    rl: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
    for row in out.rows:
        rl[row.stage][row.track][row.outcome] += 1
    by_stage = Counter(r.stage for r in sft_rows)
    return {
        "rl": {s: {t: dict(sorted(c.items())) for t, c in sorted(v.items())} for s, v in sorted(rl.items())},
        "rl_total": len(out.rows),
        "tasks": len(out.tasks),
        "trajectories": len(out.trajectories),
        "trajectories_unchecked": dict(sorted(out.unchecked.items())),
        "sft": {
            "train": sum(r.split == "train" for r in sft_rows),
            "validation": sum(r.split == "validation" for r in sft_rows),
            "by_stage": dict(sorted(by_stage.items())),
            "rejected": stats.as_dict(),
        },
        "e2e": {
            "candidates": out.e2e["candidates"],
            "accepted": out.e2e["accepted"],
            "rejected_by_reason": dict(sorted(out.e2e["rejected_by_reason"].items())),
        },
        **({} if out.writer is None else {"task_writer": out.writer}),
    }


def write_collected(
    build: Path, config: BatConfig, out: Collected, sft_rows: list[SftRow], stats: sft.SliceStats
) -> dict[str, Any]:
    """Write a collected bank into the build directory (tasks, trajectories, SFT splits and rejections, RL rows and
    their index, E2E decisions, rewritten skills); returns the manifest's counts."""
    files = BankVersionLayout(build)
    write_jsonl(files.tasks, out.tasks)
    write_jsonl(files.trajectories, out.trajectories)
    for split in SFT_SPLIT_FILES:
        write_jsonl(files.sft_split(split), [r for r in sft_rows if r.split == split])
    atomic_write_json(files.sft_rejected, stats.as_dict())
    write_jsonl(files.rl_rows, out.rows)
    atomic_write_json(files.rl_index, build_index(out.rows))
    atomic_write_json(files.e2e_acceptance, out.e2e["decisions"])
    write_skills_file(files.skills, config)
    return bank_counts(config, out, sft_rows, stats)
