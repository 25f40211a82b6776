"""What `bat status` shows: rounds x phases (done / running / queued / partial / pending) and stage scores.

Reads only: run.json, DONE.json markers, job records (+ squeue/sacct for Slurm jobs), controller
aggregates `round_NN/evaluate/aggregate_controller.json`. Writes nothing.
"""

from __future__ import annotations

from typing import Any

from bat.orchestrate.graph import ASYNC_ORDER, PHASES, round_phases
from bat.orchestrate.jobrecords import local_job_alive, read_job_record, slurm_job_state
from bat.state.atomic import read_json
from bat.state.layout import RunLayout
from bat.state.markers import phase_status, read_done


def _job_state(layout: RunLayout, r: int, phase: str) -> str | None:
    record = read_job_record(layout, r, phase)
    if not record or record.get("executor") != "slurm":
        return None
    return slurm_job_state(record["job_id"])


def _cell(layout: RunLayout, r: int, phase: str, query_slurm: bool) -> dict[str, Any]:
    state = phase_status(layout.phase_dir(r, phase))
    cell: dict[str, Any] = {"status": state}
    record = read_job_record(layout, r, phase)
    if record:
        cell["job_id"] = record["job_id"]
    if state == "done":
        done = read_done(layout.phase_dir(r, phase))
        cell["counts"] = done.counts if done else {}
        cell["compute_s"] = done.extra.get("compute_s") if done else None
        return cell
    if local_job_alive(record):
        cell["status"] = "running"
        return cell
    job = _job_state(layout, r, phase) if query_slurm else None
    if job:
        cell["job_state"] = job
        if job in ("RUNNING", "COMPLETING"):
            cell["status"] = "running"
        elif job in ("PENDING", "REQUEUED", "REQUEUE_HOLD", "CONFIGURING"):
            cell["status"] = "queued"
        elif job in ("FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED"):
            cell["status"] = "failed"
    return cell


def _scores(layout: RunLayout, r: int) -> dict[str, Any] | None:
    path = layout.round(r).aggregate("controller")
    if not path.exists():
        return None
    agg = read_json(path)
    keys = ("stages", "task", "agentic", "overall", "routable")
    return {k: agg.get(k) for k in keys}


def collect_status(layout: RunLayout, query_slurm: bool = True) -> dict[str, Any]:
    """Plain data for `bat status --json` and the rich table."""
    run = read_json(layout.run_json) if layout.run_json.exists() else {}
    budget = (run.get("config") or {}).get("run", {}).get("rounds")
    found = layout.rounds()
    last = max([*found, budget if isinstance(budget, int) else 0])
    rounds = []
    for r in range(last + 1):
        shown = list(round_phases(r))
        if layout.phase_dir(r, "final_test").exists() or layout.job_record(r, "final_test").exists():
            shown.append("final_test")
        shown += [
            p
            for p in ASYNC_ORDER
            if p not in shown  # an async bank refresh beside round r
            and (layout.phase_dir(r, p).exists() or layout.job_record(r, p).exists())
        ]
        phases = {p: _cell(layout, r, p, query_slurm) for p in shown}
        rounds.append({"round": r, "phases": phases, "scores": _scores(layout, r)})
    return {
        "state": str(layout.root),
        "run": run.get("run"),
        "config_hash": run.get("config_hash"),
        "round_budget": budget,
        "phase_order": list(PHASES),
        "rounds": rounds,
    }
