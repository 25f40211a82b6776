"""Stale torch-extension build locks: remove the ones a killed job left behind, so the next job does not hang.

DeepSpeed JIT-builds a C++ op (`deepspeed_shm_comm` on CPU) through `torch.utils.cpp_extension`. Every process
that loads it holds `<extensions dir>/<op>/lock` for the seconds the (usually no-op) ninja build takes, and every
other process waits for that file to disappear, with no timeout. A job killed while holding it (preemption,
scancel, Ctrl-C) leaves the file, and every later SFT/GRPO job then waits forever. A lock older than
`max_age_s` is older than any real build, so it is removed with a warning.

Reads/writes: `$TORCH_EXTENSIONS_DIR` (or `~/.cache/torch_extensions`) `/**/lock`, nothing else.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

DEFAULT_MAX_AGE_S = 600.0
"""Older than any real build of the op on these machines (a cold build takes well under a minute)."""


def extensions_root() -> Path:
    """Where torch puts JIT-built extensions (`TORCH_EXTENSIONS_DIR`, else `~/.cache/torch_extensions`)."""
    override = os.environ.get("TORCH_EXTENSIONS_DIR")
    return Path(override) if override else Path.home() / ".cache" / "torch_extensions"


def remove_stale_locks(
    root: Path | None = None, max_age_s: float = DEFAULT_MAX_AGE_S, now: float | None = None
) -> list[Path]:
    """Delete `lock` files up to two levels under `root` whose mtime is older than `max_age_s`; returns them."""
    root = extensions_root() if root is None else Path(root)
    now = time.time() if now is None else now
    removed = []
    for lock in [*root.glob("*/lock"), *root.glob("*/*/lock")]:
        try:
            if now - lock.stat().st_mtime > max_age_s:
                lock.unlink()
                removed.append(lock)
                print(
                    f"bat: removed stale torch-extension build lock {lock} (older than {max_age_s:.0f} s; "
                    "left by a killed job)",
                    file=sys.stderr,
                    flush=True,
                )
        except FileNotFoundError:
            continue  # released or removed by another process meanwhile
    return removed


@contextmanager
def reap_stale_locks(
    max_age_s: float = DEFAULT_MAX_AGE_S, every_s: float = 5.0, root: Path | None = None
) -> Iterator[None]:
    """While the body runs (e.g. DeepSpeed init), remove stale locks now and every `every_s` seconds, so a wait
    that began on a young stale lock also ends once the lock has aged past `max_age_s`."""
    stop = threading.Event()

    def loop() -> None:
        while True:
            remove_stale_locks(root, max_age_s)
            if stop.wait(every_s):
                return

    thread = threading.Thread(target=loop, name="bat-extension-lock-reaper", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=every_s + 1.0)
