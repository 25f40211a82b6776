"""Which job was queued for a phase, and is it still alive? (`jobs/round_NN/<phase>.job.json` + squeue/sacct)."""

from __future__ import annotations

import datetime as _dt
import os
import socket
import subprocess
from typing import Any

from bat.state.atomic import atomic_write_json, read_json
from bat.state.layout import RunLayout

SLURM_ACTIVE = frozenset(
    {
        "PENDING",
        "RUNNING",
        "REQUEUED",
        "REQUEUE_HOLD",
        "REQUEUE_FED",
        "CONFIGURING",
        "COMPLETING",
        "SUSPENDED",
        "RESIZING",
        "SIGNALING",
        "STAGE_OUT",
        "RESV_DEL_HOLD",
        "STOPPED",
        "PREEMPTED",
    }
)
"""Slurm states in which a job will still run (or finish) by itself: do not queue it again."""


def write_job_record(
    layout: RunLayout, round_index: int, phase: str, *, job_id: str, executor: str, owner: str, dependency: list[str]
) -> dict[str, Any]:
    """Record the job just queued for (round, phase); returns the record."""
    record = {
        "schema_version": 1,
        "round": round_index,
        "phase": phase,
        "job_id": str(job_id),
        "executor": executor,
        "owner": owner,
        "host": socket.gethostname(),
        "dependency": list(dependency),
        "submitted_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    atomic_write_json(layout.job_record(round_index, phase), record)
    return record


def read_job_record(layout: RunLayout, round_index: int, phase: str) -> dict[str, Any] | None:
    """The last job record of (round, phase), or None."""
    path = layout.job_record(round_index, phase)
    return read_json(path) if path.exists() else None


def _run(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def slurm_job_state(job_id: str) -> str | None:
    """Slurm state of `job_id` (squeue, then sacct for finished jobs), e.g. `RUNNING`; None if unknown."""
    out = _run(["squeue", "-h", "-j", str(job_id), "-o", "%T"])
    if out:
        return out.splitlines()[0].split()[0]
    out = _run(["sacct", "-n", "-X", "-P", "-j", str(job_id), "-o", "State"])
    if out:
        return out.splitlines()[0].split()[0]  # "CANCELLED by 0" -> "CANCELLED"
    return None


def local_job_alive(record: dict[str, Any] | None) -> bool:
    """True when the record is a local-executor job whose process still runs on this host."""
    if not record or record.get("executor") != "local" or record.get("host") != socket.gethostname():
        return False
    try:
        os.kill(int(record["job_id"]), 0)
    except (ProcessLookupError, ValueError):
        return False
    except PermissionError:
        return True
    return True


def job_active(record: dict[str, Any] | None) -> bool:
    """True when the recorded job is a Slurm job that will still run or is running."""
    if not record or record.get("executor") != "slurm":
        return False
    return slurm_job_state(record["job_id"]) in SLURM_ACTIVE
