"""Refuse a bad launch before any job is queued: phase functions importable, executor usable, partitions exist,
and on Slurm every job's resource plan fits (`bat.orchestrate.plan`)."""

from __future__ import annotations

import shutil
import subprocess
from typing import TYPE_CHECKING

from bat.config.load import ConfigError
from bat.orchestrate.container_paths import container_problems
from bat.orchestrate.executors import executor_kind
from bat.orchestrate.graph import ASYNC_ORDER, PHASES, check_round, round_phases
from bat.orchestrate.plan import plan_problems

if TYPE_CHECKING:
    from bat.config.root import BatConfig


class PreflightError(ConfigError):
    """The launch would fail; nothing was queued. The message lists every problem and what is valid."""


def slurm_partitions() -> list[str]:
    """Partition names known to the cluster (`sinfo -h -o %R`); [] when sinfo fails."""
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%R"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return sorted({line.strip() for line in out.stdout.splitlines() if line.strip()}) if out.returncode == 0 else []


def preflight_problems(config: BatConfig, round_index: int) -> list[str]:
    """Every reason the round `round_index` cannot be queued with this config; [] when fine."""
    problems: list[str] = []
    if round_index > config.run.rounds:
        problems.append(f"round {round_index} is beyond the round budget run.rounds={config.run.rounds}")
    phases = round_phases(round_index, config)
    if round_index >= 1 and config.orchestrate.bank_refresh:
        phases = (*phases, *ASYNC_ORDER)
    problems += check_round(config, round_index, phases)
    problems += model_problems(config)
    kind = executor_kind(config)
    if kind == "slurm":
        if shutil.which("sbatch") is None:
            problems.append("orchestrate.executor=slurm but `sbatch` is not on PATH; valid here: local, debug")
        else:
            wanted = {PHASES[p].resources for p in phases}
            valid = slurm_partitions()
            for key in sorted(wanted):
                part = config.orchestrate.resources[key].partition
                if part and valid and part not in valid:
                    problems.append(f"orchestrate.resources.{key}.partition={part!r} does not exist; valid: {valid}")
        problems += plan_problems(config)
        problems += container_problems(config)
    return problems


def model_problems(config: BatConfig) -> list[str]:
    """Why the base policy cannot be had: a named pretrained model whose package is not installed; [] when
    fine (reads only package metadata)."""
    from bat.policy.pretrained import PretrainedUnavailable, locate_gguf, source

    if not config.model.pretrained:
        return []
    try:
        locate_gguf(source(config.model.pretrained))
    except PretrainedUnavailable as exc:
        return [str(exc)]
    return []


def preflight(config: BatConfig, round_index: int) -> None:
    """Raise PreflightError listing every problem; returns None when the round can be queued."""
    problems = preflight_problems(config, round_index)
    if problems:
        raise PreflightError(f"refusing to queue round {round_index}:\n  " + "\n  ".join(problems))
