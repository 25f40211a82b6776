"""Preemption of phase jobs: flush hooks, signal handlers and the interruption kind (`PhaseJob`, the
`submitit.helpers.Checkpointable` submitted per phase, lives in `bat.orchestrate.driver` beside the queueing it
recurses into).

On USR2 submitit calls `PhaseJob.checkpoint()`: registered flush hooks persist in-memory progress, the event
log says whether it was a timeout or a preemption, and the same job (same arguments) is requeued.
On SIGTERM (`orchestrate.sigterm_flush`) the hooks run and the process exits without requeueing. A requeued phase calls its phase function again,
which resumes from its partial outputs; a plain `scontrol requeue` or SIGKILL + requeue lands in
the same place because nothing lives only in memory.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

_FLUSH_HOOKS: list[Callable[[], None]] = []


def on_interrupt(fn: Callable[[], None]) -> Callable[[], None]:
    """Register `fn` to run (in this process) before the job is requeued; returns `fn` (decorator-friendly)."""
    _FLUSH_HOOKS.append(fn)
    return fn


def run_flush_hooks() -> int:
    """Run and clear the registered hooks; returns how many ran."""
    hooks = list(_FLUSH_HOOKS)
    _FLUSH_HOOKS.clear()
    for hook in hooks:
        hook()
    return len(hooks)


_HANDLER: Any = None  # submitit's SignalHandler of this job, once `install_signal_handlers` ran


def _submitit_handler() -> Any:
    """submitit's SignalHandler of this job (None outside a submitit job)."""
    if _HANDLER is not None:
        return _HANDLER
    handler = signal.getsignal(signal.SIGUSR2)
    owner = getattr(handler, "__self__", None)
    return owner if owner is not None and hasattr(owner, "checkpoint_and_try_requeue") else None


def install_signal_handlers(sigterm_flush: bool, on_sigterm: Callable[[int], None] | None = None) -> bool:
    """USR2 -> submitit's checkpoint + requeue, at most once per process; SIGTERM -> flush and exit.

    The same signal can arrive twice (batch step and task): only the first one checkpoints and
    requeues. SIGTERM comes from preemption on SIGTERM-only clusters (Slurm itself requeues a
    `--requeue` job) or from `scancel` (the job must stay cancelled), so it never requeues by itself.
    Returns False outside a submitit job.
    """
    global _HANDLER
    handler = _submitit_handler()
    if handler is None:
        return False
    _HANDLER = handler
    fired: list[int] = []

    def once(signum: int, frame: Any) -> None:
        if fired:
            return  # already checkpointing/requeueing this process
        fired.append(signum)
        handler.checkpoint_and_try_requeue(signum, frame)

    def flush_and_exit(signum: int, frame: Any) -> None:
        if fired:
            return
        fired.append(signum)
        flushed = run_flush_hooks()
        if on_sigterm is not None:
            on_sigterm(flushed)
        raise SystemExit(128 + signal.SIGTERM)

    signal.signal(signal.SIGUSR2, once)
    if sigterm_flush:
        signal.signal(signal.SIGTERM, flush_and_exit)
    return True


def interruption_kind() -> str:
    """`timeout` or `preemption` as submitit classifies it (elapsed >= min(0.8 T, T - 10 min) => timeout)."""
    handler = _submitit_handler()
    if handler is None:
        return "preemption"
    return "timeout" if handler.has_timed_out() else "preemption"
