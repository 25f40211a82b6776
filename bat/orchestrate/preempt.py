"""Preemption-safe phase jobs: a `submitit.helpers.Checkpointable` that resumes from files on disk.

On USR2 submitit calls `checkpoint()`: registered flush hooks persist in-memory progress, the event
log says whether it was a timeout or a preemption, and the same job (same arguments) is requeued.
On SIGTERM (`orchestrate.sigterm_flush`) the hooks run and the process exits without requeueing. A requeued phase calls its phase function again,
which resumes from its partial outputs; a plain `scontrol requeue` or SIGKILL + requeue lands in
the same place because nothing lives only in memory.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import submitit

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
            from bat.orchestrate.driver import after_route

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
