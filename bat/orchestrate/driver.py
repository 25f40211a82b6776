"""Queue rounds: inspect state, take the round lease, submit only unfinished phases as an `afterok` chain.

Slurm: every phase of a round is submitted up front; the route job queues round r+1 (`after_route`).
local/debug: phases run one after another and `run` loops over rounds in this process.
Reads: DONE.json markers, the route's decision.json, job records, the lease. Writes: job records, leases, events, run.json.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import submitit

from bat.orchestrate.executors import executor_kind, make_executor
from bat.orchestrate.graph import ASYNC_ORDER, round_phases
from bat.orchestrate.jobrecords import job_active, read_job_record, write_job_record
from bat.orchestrate.jobwait import PhaseFailed, PhaseInputError, await_job, children_ignore_sigint
from bat.orchestrate.preempt import install_signal_handlers, interruption_kind, run_flush_hooks
from bat.orchestrate.preflight import preflight
from bat.phase.events import log_event
from bat.state.atomic import read_json
from bat.state.layout import RunLayout
from bat.state.lease import Lease, LeaseHeld
from bat.state.markers import read_done

if TYPE_CHECKING:
    from bat.config.root import BatConfig


class PhaseJob(submitit.helpers.Checkpointable):
    """The callable submitted for one (round, phase); pickled by submitit with plain-data arguments."""

    def __init__(
        self, config_data: dict[str, Any], state_root: str, round_index: int, phase: str, chain_next: bool = False
    ) -> None:
        self.config_data = config_data
        self.state_root = str(state_root)
        self.round_index = round_index
        self.phase = phase
        self.chain_next = chain_next

    def _open(self) -> tuple[Any, Any]:
        from bat.config.load import parse_config
        from bat.state.layout import RunLayout

        return parse_config(self.config_data, "<job config>"), RunLayout(Path(self.state_root))

    def __call__(self) -> dict[str, Any]:
        """Run the phase (no-op when DONE); after `route`, queue the next round when `chain_next`."""
        from bat.orchestrate.runner import run_phase
        from bat.phase.events import log_event

        config, layout = self._open()

        def on_sigterm(flushed: int) -> None:
            log_event(
                layout,
                self.round_index,
                self.phase,
                f"SIGTERM: flushed {flushed} hook(s), exiting (Slurm requeues a preempted job)",
            )

        install_signal_handlers(config.orchestrate.sigterm_flush, on_sigterm)
        restarts = os.environ.get("SLURM_RESTART_COUNT", "0")
        log_event(layout, self.round_index, self.phase, f"job running (restart count {restarts})")
        from bat.config.load import ConfigError
        from bat.state.errors import StateFileError

        try:
            result = run_phase(config, layout, self.round_index, self.phase)
        except (StateFileError, ConfigError) as exc:  # a damaged input: reported, not a crash (no DONE.json)
            log_event(layout, self.round_index, self.phase, f"refused a damaged input: {exc}")
            return {"phase": self.phase, "round": self.round_index, "ran": False, "input_error": str(exc)}
        summary: dict[str, Any] = {"phase": self.phase, "round": self.round_index, "ran": result is not None}
        if self.phase == "route" and self.chain_next:
            summary["next"] = after_route(config, layout, self.round_index)
        return summary

    def checkpoint(self, *args: Any, **kwargs: Any) -> submitit.helpers.DelayedSubmission:
        """Flush progress, record why we were interrupted, resubmit the same job."""
        from bat.phase.events import log_event

        flushed = run_flush_hooks()
        _, layout = self._open()
        log_event(
            layout,
            self.round_index,
            self.phase,
            f"interrupted ({interruption_kind()}), flushed {flushed} hook(s), requeueing",
        )
        return super().checkpoint(*args, **kwargs)


def default_owner() -> str:
    """Who is queueing: the Slurm job id when inside one, else host:pid."""
    job = os.environ.get("SLURM_JOB_ID")
    return f"slurm-job-{job}" if job else f"{socket.gethostname()}:{os.getpid()}"


def route_stopped(layout: RunLayout, round_index: int) -> bool:
    """True when round `round_index`'s route is DONE and its decision record (`round_NN/decision.json`) ends the
    run (`next_round` null)."""
    if read_done(layout.phase_dir(round_index, "route")) is None or not layout.round(round_index).decision.exists():
        return False
    decision = read_json(layout.round(round_index).decision)  # a torn file: StateFileError naming it
    return "next_round" in decision and decision["next_round"] is None


def next_round(config: BatConfig, layout: RunLayout) -> int | None:
    """First round (0..run.rounds) whose route is not DONE; None when finished or route asked to stop.

    Reads every phase marker of each round it passes, so a damaged one in a finished run raises `StateFileError`
    naming it and what to do, instead of the run reading as finished."""
    for r in range(config.run.rounds + 1):
        if read_done(layout.phase_dir(r, "route")) is None:
            return r
        unfinished = [p for p in round_phases(r, config) if read_done(layout.phase_dir(r, p)) is None]
        if route_stopped(layout, r):
            return None
        if unfinished:
            return r  # the last round's final_test still to run
    return None


def queue_phase(
    config: BatConfig,
    layout: RunLayout,
    r: int,
    phase: str,
    deps: list[str],
    owner: str,
    heartbeat: Callable[[], None] = lambda: None,
) -> str | None:
    """Queue (round, phase) unless DONE or already queued; returns the live Slurm job id or None.

    local/debug executors wait for the job here (heartbeating the lease) and raise PhaseFailed.
    """
    if read_done(layout.phase_dir(r, phase)) is not None:
        return None
    kind = executor_kind(config)
    record = read_job_record(layout, r, phase)
    if kind == "slurm" and job_active(record):
        log_event(layout, r, phase, f"already queued as job {record['job_id']}, not queueing again")
        return str(record["job_id"])
    from bat.config.load import resolved_dict

    executor = make_executor(config, layout, r, phase, deps)
    with children_ignore_sigint(kind == "local"):
        job = executor.submit(PhaseJob(resolved_dict(config), str(layout.root), r, phase, chain_next=kind == "slurm"))
    write_job_record(layout, r, phase, job_id=job.job_id, executor=kind, owner=owner, dependency=deps)
    log_event(layout, r, phase, f"queued job {job.job_id} on {kind}" + (f" afterok:{':'.join(deps)}" if deps else ""))
    if kind == "slurm":
        return str(job.job_id)
    _wait_local(config, layout, r, phase, job, kind, heartbeat)
    return None


def _wait_local(
    config: BatConfig, layout: RunLayout, r: int, phase: str, job, kind: str, heartbeat: Callable[[], None]
) -> None:
    """Wait for a local/debug job, printing progress; raise PhaseFailed unless it wrote DONE.json."""
    started = time.monotonic()
    summary = await_job(
        config, layout, r, phase, job, kind, heartbeat, f"[round {r}] {phase}", f"round {r} phase {phase}"
    )
    if isinstance(summary, dict) and summary.get("input_error"):
        raise PhaseInputError(f"round {r} phase {phase}: {summary['input_error']}")
    done = read_done(layout.phase_dir(r, phase))
    if done is None:
        raise PhaseFailed(f"round {r} phase {phase}: job {job.job_id} ended without DONE.json")
    counts = ", ".join(f"{k}={v:g}" for k, v in done.counts.items())
    print(f"[round {r}] {phase}: DONE in {time.monotonic() - started:.1f}s ({counts})", flush=True)


def queue_round(config: BatConfig, layout: RunLayout, r: int, owner: str | None = None) -> list[str]:
    """Preflight, take the round lease, queue the round's unfinished phases in order; returns queued job ids.

    Raises PreflightError (nothing queued) or LeaseHeld (another driver is queueing this round).
    """
    preflight(config, r)
    owner = owner or default_owner()
    lease = Lease(layout.lease(f"round_{r:02d}"), owner, ttl_s=config.orchestrate.lease_ttl_s).acquire()
    log_event(layout, r, "driver", f"lease taken by {owner}")
    try:
        jobs = _queue_chain(config, layout, r, round_phases(r, config), owner, lease.heartbeat)
        if r >= 1 and config.orchestrate.bank_refresh:
            jobs += _queue_chain(config, layout, r, ASYNC_ORDER, owner, lease.heartbeat)
    finally:
        lease.release()
    return jobs


def _queue_chain(
    config: BatConfig, layout: RunLayout, r: int, phases: tuple[str, ...], owner: str, heartbeat: Callable[[], None]
) -> list[str]:
    deps: list[str] = []
    for phase in phases:
        heartbeat()
        job_id = queue_phase(config, layout, r, phase, list(deps), owner, heartbeat)
        if job_id is not None:
            deps.append(job_id)
    return deps


def after_route(config: BatConfig, layout: RunLayout, r: int) -> str:
    """Inside the route job (Slurm): stop on the route's request or the budget, else queue round r+1."""
    if route_stopped(layout, r):
        log_event(layout, r, "route", "route asked to stop: no further rounds")
        return "stopped"
    if r + 1 > config.run.rounds:
        log_event(layout, r, "route", f"round budget run.rounds={config.run.rounds} reached")
        return "budget reached"
    try:
        jobs = queue_round(config, layout, r + 1)
    except LeaseHeld as exc:
        log_event(layout, r, "route", f"round {r + 1} is being queued by another driver ({exc})")
        return "held"
    return f"queued round {r + 1}: {jobs}"


def export_heldout_side(config: BatConfig, layout: RunLayout) -> None:
    """At run start, before any phase: the run's held-out secret exists and the fingerprint index is exported under
    it (the training phases read that index; the held-out guard keeps them from the secret)."""
    from bat.benchmark.secret import run_secret
    from bat.leakage.preflight import export_index

    run_secret(layout)
    if config.leakage.enabled and config.benchmark.kind == "builtin":
        export_index(layout, config)


def run(
    config: BatConfig,
    layout: RunLayout,
    *,
    owner: str | None = None,
    wait: bool = False,
    allow_config_change: bool = False,
) -> int:
    """`bat run` / run_round.sh: queue (Slurm) or run (local) rounds until done; returns an exit code."""
    from bat.config.run_record import open_run

    r = next_round(config, layout)
    if r is None:
        if layout.run_json.exists():  # a changed config is refused on a finished run as on an unfinished one
            open_run(layout, config, allow_config_change=allow_config_change)
        print(f"bat: {layout.root}: all {config.run.rounds} round(s) finished (or route stopped); nothing to do")
        return 0
    preflight(config, r)
    open_run(layout, config, allow_config_change=allow_config_change)
    export_heldout_side(config, layout)
    kind = executor_kind(config)
    while r is not None:
        try:
            jobs = queue_round(config, layout, r, owner)
        except LeaseHeld as exc:
            print(f"bat: round {r} not queued: {exc}")
            return 0
        if kind == "slurm":
            print(f"bat: round {r} queued on Slurm: jobs {jobs or '(all phases already DONE or queued)'}")
            return wait_slurm(config, layout) if wait else 0
        print(f"bat: round {r} finished ({kind} executor)")
        r = next_round(config, layout)
    return 0


def wait_slurm(config: BatConfig, layout: RunLayout, timeout_s: float | None = None) -> int:
    """Poll until every round is DONE (0) or no job of the unfinished round is alive any more (1)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    quiet = 0
    while True:
        r = next_round(config, layout)
        if r is None:
            return 0
        alive = any(
            job_active(read_job_record(layout, rr, p)) for rr in (r, max(r - 1, 0)) for p in round_phases(rr, config)
        )
        quiet = 0 if alive else quiet + 1
        if quiet >= 3:  # three polls without a live job: the chain broke (failed or cancelled phase)
            log_event(layout, r, "driver", "no live job left and round unfinished: resubmit to resume")
            return 1
        if deadline is not None and time.monotonic() > deadline:
            return 1
        time.sleep(config.orchestrate.poll_s)
