"""The held-out guard: a training phase that opens anything under `state/<run>/heldout/` fails loudly.

A process-wide `sys.addaudithook` hook (installed once, inert while no guard is active) checks the `open`,
`os.listdir`, `os.scandir`, `os.chdir`, `shutil.copytree`, `glob.glob` and `os.rename`/`os.remove` audit events
against the guarded directories. A hit raises `HeldoutAccessError` (not an OSError, so `except OSError` cannot
swallow it) and is recorded; leaving the guard raises again if a recorded violation was swallowed anyway.
Subprocesses are not covered by the hook (the sandbox never binds the held-out dir).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from bat.state.layout import RunLayout

if TYPE_CHECKING:
    from bat.phase.context import PhaseContext

_EVENTS = frozenset(
    {
        "open",
        "os.listdir",
        "os.scandir",
        "os.chdir",
        "shutil.copytree",
        "glob.glob",
        "os.rename",
        "os.remove",
        "shutil.copyfile",
        "os.walk",
    }
)


class HeldoutAccessError(RuntimeError):
    """A guarded (training) phase touched the held-out side of the state directory."""


@dataclass
class _Guard:
    root: str
    phase: str
    violations: list[str] = field(default_factory=list)


_ACTIVE: list[_Guard] = []
_LOCK = threading.Lock()
_INSTALLED = False
_IN_HOOK = threading.local()


def _hits(path: str, root: str) -> bool:
    return path == root or path.startswith(root + os.sep)


def _hook(event: str, args: tuple) -> None:
    if not _ACTIVE or event not in _EVENTS or not args:
        return
    if getattr(_IN_HOOK, "busy", False):
        return
    raw = args[0]
    if raw is None or isinstance(raw, int):
        return
    _IN_HOOK.busy = True
    try:
        try:
            text = os.fsdecode(raw)
        except TypeError:
            return
        real = os.path.realpath(text)
        absolute = os.path.abspath(text)
        for guard in list(_ACTIVE):
            if _hits(real, guard.root) or _hits(absolute, guard.root):
                message = (
                    f"held-out access from training phase {guard.phase!r}: {event} {text!r} is under {guard.root}; "
                    "only evaluation phases may read the held-out side (evaluate.heldout_phases)"
                )
                guard.violations.append(message)
                raise HeldoutAccessError(message)
    finally:
        _IN_HOOK.busy = False


def _install() -> None:
    global _INSTALLED
    with _LOCK:
        if not _INSTALLED:
            sys.addaudithook(_hook)
            _INSTALLED = True


@contextlib.contextmanager
def heldout_guard(layout: RunLayout, phase: str) -> Iterator[None]:
    """While active, any open/listdir/... under `layout.heldout_dir` raises `HeldoutAccessError`."""
    _install()
    guard = _Guard(root=os.path.realpath(layout.heldout_dir), phase=phase)
    with _LOCK:
        _ACTIVE.append(guard)
    try:
        yield
    finally:
        with _LOCK:
            _ACTIVE.remove(guard)
    if guard.violations:
        raise HeldoutAccessError(
            f"{len(guard.violations)} held-out access(es) in phase {phase!r}: {guard.violations[0]}"
        )


def phase_may_read_heldout(phase: str, heldout_phases: tuple[str, ...]) -> bool:
    """True for the evaluation phases listed in `evaluate.heldout_phases`."""
    return phase in heldout_phases


def guard_phase(ctx: PhaseContext) -> contextlib.AbstractContextManager[None]:
    """The guard a phase runs under: active unless the phase is listed in `evaluate.heldout_phases` or guard=off."""
    cfg = ctx.config.evaluate
    if not cfg.guard or phase_may_read_heldout(ctx.phase, cfg.heldout_phases):
        return contextlib.nullcontext()
    return heldout_guard(ctx.layout, ctx.phase)


def assert_outside_heldout(layout: RunLayout, path: Path) -> None:
    """Raise if `path` lies on the held-out side (for code that copies aggregates to the training side)."""
    if _hits(os.path.realpath(path), os.path.realpath(layout.heldout_dir)):
        raise HeldoutAccessError(
            f"{path} is on the held-out side ({layout.heldout_dir}); write aggregates under round_NN/"
        )
