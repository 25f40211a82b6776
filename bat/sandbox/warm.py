"""Host side of warm mode: one long-lived sandboxed `bat.sandbox.toolserver` per workspace.

The server boots once through the same runtime argv as a cold call (same mounts, same uid drop,
rlimits as ceilings); each call is one JSON line out and one JSON line back.  The server is restarted
when it dies (code in a call may kill it: that call is recorded as killed, never as infrastructure)
or when the workspace directory was replaced (a `Workspace.reset()` swaps the directory, and a bind
mount keeps pointing at the old one).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import secrets
import selectors
import shutil
import subprocess
import tempfile
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bat.sandbox.limits import Limits
from bat.sandbox.spawn import Capture, Outcome

BOOT_TIMEOUT_S = 120.0
"""Preloading heavy modules on a busy node can take a while."""
SERVER_CPU_S = 10_000_000
"""The server's own RLIMIT_CPU (calls get theirs per fork); effectively unlimited."""


class ServerBootError(RuntimeError):
    """The warm server did not come up (raised as SandboxBootError by the caller)."""


def _capture(data: dict[str, Any], keep: int) -> Capture:
    cap = Capture(keep)
    cap.head = bytearray(base64.b64decode(data.get("head", "")))
    cap.tail = bytearray(base64.b64decode(data.get("tail", "")))
    cap.total = int(data.get("total", 0))
    return cap


class WarmServer:
    """A running tool server: `call(payload, timeout_s) -> Outcome`; `close()` kills it."""

    def __init__(
        self,
        *,
        argv_for: Callable[[list[str], Path, Limits], list[str]],
        env: dict[str, str],
        python: str,
        preload: tuple[str, ...],
        workspace: Path,
        limits: Limits,
        scratch: Path,
    ) -> None:
        self.workspace = workspace
        self.scratch = scratch
        self.identity = self._identity()
        self.log = tempfile.TemporaryFile()
        notice = f"bat-toolserver-{secrets.token_hex(8)}"
        server_limits = dataclasses.replace(limits, cpu_s=SERVER_CPU_S)
        argv = argv_for([python, "-m", "bat.sandbox.toolserver", notice, *preload], scratch, server_limits)
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            cwd=scratch,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
        self._finalizer = weakref.finalize(self, _shutdown, self.proc, self.log, scratch)
        self._buffer = bytearray()
        ready = self._read_line(time.monotonic() + BOOT_TIMEOUT_S)
        try:
            hello = json.loads(ready) if ready else {}
        except json.JSONDecodeError:
            hello = {}
        if hello.get("ready") != notice:
            detail = self._log_tail() or repr(ready)
            self.close()
            raise ServerBootError(f"warm tool server did not start: {detail}")
        self.preload_errors: list[str] = list(hello.get("preload_errors", []))

    def _identity(self) -> tuple[int, int]:
        info = self.workspace.stat()
        return info.st_dev, info.st_ino

    def usable(self) -> bool:
        """Alive and still bound to the current workspace directory."""
        try:
            same = self._identity() == self.identity
        except OSError:
            return False
        return self.proc.poll() is None and same

    def _log_tail(self) -> str:
        self.log.seek(0)
        return self.log.read().decode("utf-8", errors="replace").strip()[-500:]

    def _read_line(self, deadline: float) -> bytes | None:
        """One line from the server's stdout before `deadline`; None on EOF or timeout."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not sel.select(timeout=remaining):
                    return None
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    return None
                self._buffer += chunk
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer = bytearray(rest)
        return line

    def call(self, payload: dict[str, Any], timeout_s: float, keep_bytes: int) -> Outcome:
        """Send one call and wait for its reply (server-enforced deadline + grace); a lost server
        yields an Outcome killed by SIGKILL and the server is closed (the next call restarts it)."""
        start = time.monotonic()
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(payload).encode() + b"\n")
            self.proc.stdin.flush()
            line = self._read_line(start + timeout_s + 10.0)
            reply = json.loads(line) if line else None
        except (BrokenPipeError, json.JSONDecodeError):
            reply = None
        if not isinstance(reply, dict):
            self.close()
            elapsed = time.monotonic() - start
            return Outcome(
                returncode=-9,
                duration_s=elapsed,
                stdout=Capture(keep_bytes),
                stderr=Capture(keep_bytes),
                timed_out=elapsed >= timeout_s,
            )
        return Outcome(
            returncode=int(reply["returncode"]),
            duration_s=float(reply["duration_s"]),
            stdout=_capture(reply["stdout"], keep_bytes),
            stderr=_capture(reply["stderr"], keep_bytes),
            timed_out=bool(reply["timed_out"]),
            output_too_large=bool(reply["output_too_large"]),
        )

    def close(self) -> None:
        """Kill the server's whole process group and remove its scratch directory (idempotent)."""
        self._finalizer()


def _shutdown(proc: subprocess.Popen[bytes], log: Any, scratch: Path) -> None:
    """Stop a server and clean up; also runs when a never-closed server is collected or bat exits."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
    for stream in (proc.stdin, proc.stdout):
        if stream is not None and not stream.closed:
            try:
                stream.close()
            except BrokenPipeError:
                pass
    proc.wait()
    log.close()
    shutil.rmtree(scratch, ignore_errors=True)
