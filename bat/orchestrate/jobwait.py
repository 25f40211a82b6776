"""Wait for submitit jobs from the process that queued them: where the log is, training steps as they land, Ctrl-C
that stops a local job, and a failure reduced to the job's own error line.

`run_callable` runs one extra job (not a phase) under a phase's executor and resources and waits for it; the driver
waits for its local/debug phase jobs through `await_job`. Reads a job's submitit files and a training phase's
`metrics.jsonl`; writes event lines only.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.orchestrate.executors import executor_kind, make_executor
from bat.phase.events import log_event

if TYPE_CHECKING:
    from bat.config.root import BatConfig
    from bat.state.layout import RunLayout


class PhaseFailed(RuntimeError):
    """A phase job ended without writing DONE.json (its log path is in the message)."""


class PhaseInputError(PhaseFailed):
    """A phase refused a damaged or invalid input (a state file, a config): the message names it and what to do."""


TRACE_RULE = "-" * 22
"""The rule submitit's `FailedJobError` text puts above and below the job's traceback (its log paths follow)."""


def last_line(error: BaseException) -> str:
    """The final `Type: message` line of a job failure: the last line of the job's traceback inside submitit's
    error text (which ends with the job's log paths), else of the whole text."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    rules = [i for i, line in enumerate(lines) if line == TRACE_RULE]
    if len(rules) >= 2 and rules[-1] - rules[0] > 1:  # the job's own lines may hold longer rules: first to last
        lines = lines[rules[0] + 1 : rules[-1]]
    return lines[-1] if lines else type(error).__name__


class StepProgress:
    """Prints a training phase's newest step line (`metrics.jsonl`: step, loss, val_loss, tokens/s) once per step."""

    def __init__(self, metrics: Path, prefix: str) -> None:
        self.metrics, self.prefix, self.size, self.step = metrics, prefix, 0, 0

    def report(self) -> None:
        """Reads only the file's size and, when it grew, its last line; never raises on a torn or missing file."""
        try:
            size = self.metrics.stat().st_size
            if size == self.size:
                return
            self.size = size
            last = json.loads(self.metrics.read_text(encoding="utf-8").strip().splitlines()[-1])
        except (OSError, ValueError, IndexError):
            return
        step = last.get("step") if isinstance(last, dict) else None
        if not isinstance(step, int) or step <= self.step:
            return
        self.step = step
        parts = [
            f"{key} {last[key]:.4g}"
            for key in ("loss", "val_loss", "reward_mean", "tokens_per_s")
            if isinstance(last.get(key), (int, float))
        ]
        print(f"{self.prefix}: step {step}: {', '.join(parts)}", flush=True)


@contextlib.contextmanager
def children_ignore_sigint(active: bool):
    """Processes started inside inherit SIGINT blocked (it is never delivered to them): a terminal's Ctrl-C reaches
    only this driver, which stops the local job itself (`stop_local_job`) instead of the job and submitit's
    controller each printing a traceback. A Ctrl-C that arrives while a job is being started is recorded (by
    whichever thread takes it) and raised as KeyboardInterrupt once the start is over, never lost and never in
    the middle of starting a job. Main thread only."""
    if not active or threading.current_thread() is not threading.main_thread():
        yield
        return
    interrupted: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: interrupted.append(signum))
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # a pending Ctrl-C is recorded here
        signal.signal(signal.SIGINT, previous)
    if interrupted:
        raise KeyboardInterrupt


def stop_local_job(job, timeout_s: float = 60.0) -> None:
    """SIGTERM to a local job's submitit controller, which forwards it to the phase (it flushes and exits; its
    files are atomic, so nothing is torn); waits up to `timeout_s` for the job to end."""
    with contextlib.suppress(ProcessLookupError, ValueError, PermissionError):
        os.kill(int(job.job_id), signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while not job.done() and time.monotonic() < deadline:
        time.sleep(0.2)


def await_job(
    config: BatConfig,
    layout: RunLayout,
    r: int,
    phase: str,
    job,
    kind: str,
    heartbeat: Callable[[], None],
    label: str,
    name: str,
) -> Any:
    """Wait for `job` (any executor kind), printing where its log is and each training step under `label`; returns
    its result.

    Ctrl-C stops a local job (its files are atomic; a rerun resumes) and is re-raised. Raises PhaseFailed (`name`
    and the job's log) when the job failed or (local) died without a result."""
    print(f"{label}: running (job {job.job_id}, log {job.paths.stderr})", flush=True)
    progress = StepProgress(layout.training_metrics(r, phase), label)
    try:
        while not job.done():
            heartbeat()
            progress.report()
            time.sleep(min(config.orchestrate.poll_s, 0.5) if kind != "slurm" else config.orchestrate.poll_s)
    except KeyboardInterrupt:
        if kind == "local":
            log_event(layout, r, phase, "interrupted (Ctrl-C): stopping the job; rerun to resume")
            stop_local_job(job)
        raise
    if kind == "local" and not wait_for(job.paths.result_pickle, 2.0):  # none at all = the job was killed
        raise PhaseFailed(
            f"{name}: job {job.job_id} died without a result (killed?); "
            f"log {job.paths.stderr}; rerun to resume from its partial outputs"
        )
    try:
        return job.result()
    except Exception as exc:  # submitit re-raises the job's failure with its whole traceback: keep the last line
        last = last_line(exc)
        if last.split(":")[0].endswith("KeyboardInterrupt"):  # Ctrl-C reached the job before this process
            raise KeyboardInterrupt from None
        raise PhaseFailed(f"{name} failed (job {job.job_id}): {last}; traceback in {job.paths.stderr}") from None


def run_callable(config: BatConfig, layout: RunLayout, r: int, phase: str, fn: Callable[[], Any], label: str) -> Any:
    """Run `fn` (a picklable callable, e.g. a `submitit.helpers.Checkpointable`) as one job under (round `r`,
    `phase`)'s executor and resources, its submitit files under `jobs/round_NN/<phase>/`, and wait for it
    (`orchestrate.executor`: a Slurm job, a local process or this process); returns its result.

    For work that belongs to a phase's job but is not the phase itself (an extra evaluation of a finished run), so
    that on a cluster it runs on a compute node, never in the process that asked for it. Writes one event line;
    `fn` must be idempotent (a requeued or rerun job calls it again). Raises PhaseFailed naming the job's log."""
    kind = executor_kind(config)
    executor = make_executor(config, layout, r, phase)
    with children_ignore_sigint(kind == "local"):
        job = executor.submit(fn)
    log_event(layout, r, phase, f"{label}: job {job.job_id} on {kind}")
    return await_job(config, layout, r, phase, job, kind, lambda: None, label, label)


def wait_for(path, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return path.exists()
