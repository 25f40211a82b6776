"""Every `bat doctor` check in order, and the text the command prints. Reads what each check module reads."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bat.doctor.container import check_apptainer, check_user_namespaces
from bat.doctor.finding import Finding
from bat.doctor.gpu import check_gpus
from bat.doctor.slurm import check_slurm
from bat.doctor.stack import check_stack
from bat.doctor.storage import check_model, check_storage

if TYPE_CHECKING:
    from bat.config.root import BatConfig

AREAS = ("slurm", "apptainer", "userns", "gpus", "model", "storage", "stack")
"""The check areas, in the order they run; `bat doctor --skip AREA` leaves one out."""


def run_checks(config: BatConfig, state: Path, skip: tuple[str, ...] = ()) -> list[Finding]:
    """Every finding of the areas not skipped."""
    from bat.orchestrate.executors import executor_kind

    runs = {
        "slurm": lambda: check_slurm(config, executor_kind(config) == "slurm"),
        "apptainer": lambda: check_apptainer(config),
        "userns": lambda: check_user_namespaces(config),
        "gpus": lambda: check_gpus(config),
        "model": lambda: check_model(config),
        "storage": lambda: check_storage(config, state),
        "stack": lambda: check_stack(driver_only=config.orchestrate.container.enabled),
    }
    return [finding for area in AREAS if area not in skip for finding in runs[area]()]


def render(findings: list[Finding]) -> str:
    """One block per finding (`ok`, `PROBLEM`, `unused`), what to do under a problem, and a closing count."""
    lines = []
    for f in findings:
        label = {"ok": "ok     ", "problem": "PROBLEM", "unused": "unused "}[f.status]
        lines.append(f"{label} {f.name}: {f.seen}")
        if f.fix:
            lines.append(f"        what to do: {f.fix}")
    problems = sum(f.status == "problem" for f in findings)
    lines.append(f"{problems} problem(s), {sum(f.status == 'ok' for f in findings)} ok, {len(findings)} checked")
    return "\n".join(lines)
