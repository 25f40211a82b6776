"""Run one argv in its own session with a wall-clock deadline, capped output and whole-tree kill."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Capture:
    """Head and tail of one stream; `total` counts every byte seen."""

    keep: int
    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    total: int = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.keep - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.keep:
                del self.tail[: len(self.tail) - self.keep]

    def text(self) -> tuple[str, bool]:
        """Decoded text with an elision marker in the middle when bytes were dropped; (text, truncated)."""
        dropped = self.total - len(self.head) - len(self.tail)
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if dropped > 0:
            return f"{head}\n...[{dropped} bytes elided]...\n{tail}", True
        return head + tail, False


@dataclass
class Outcome:
    """How a spawned command ended."""

    returncode: int
    duration_s: float
    stdout: Capture
    stderr: Capture
    timed_out: bool = False
    output_too_large: bool = False


def kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group led by `proc` (its whole tree unless a member left the session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@dataclass
class Pumped:
    """What `pump` collected."""

    stdout: Capture
    stderr: Capture
    timed_out: bool = False
    output_too_large: bool = False


def pump(
    *,
    stdin_fd: int,
    stdin: bytes,
    stdout_fd: int,
    stderr_fd: int,
    exited: Callable[[], bool],
    kill: Callable[[], None],
    deadline: float,
    keep_bytes: int,
    max_output_bytes: int,
) -> Pumped:
    """Feed `stdin`, read both output fds into head/tail captures until EOF, deadline or flood.

    `exited()` says whether the main process has ended; once it has, `kill()` removes what it left in
    its process group and reading stops a second later at the latest.  Closes `stdin_fd` (others not).
    """
    got = Pumped(Capture(keep_bytes), Capture(keep_bytes))
    pending = memoryview(stdin)
    for fd in (stdin_fd, stdout_fd, stderr_fd):
        os.set_blocking(fd, False)
    with selectors.DefaultSelector() as sel:
        if pending:
            sel.register(stdin_fd, selectors.EVENT_WRITE)
        else:
            os.close(stdin_fd)
        sel.register(stdout_fd, selectors.EVENT_READ, got.stdout)
        sel.register(stderr_fd, selectors.EVENT_READ, got.stderr)
        exited_at: float | None = None
        while sel.get_map() and not got.output_too_large:
            now = time.monotonic()
            if now >= deadline:
                got.timed_out = True
                break
            if exited_at is None and exited():
                exited_at = now
                kill()
            if exited_at is not None and now - exited_at > 1.0:
                break  # a leftover outside the group still holds the pipe; stop waiting for it
            for key, _ in sel.select(timeout=min(0.05 if exited_at is None else 0.1, deadline - now)):
                if key.fd == stdin_fd:
                    pending = _feed_stdin(sel, stdin_fd, pending)
                elif _read_output(sel, key, got, max_output_bytes):
                    break
        if stdin_fd in {key.fd for key in sel.get_map().values()}:
            os.close(stdin_fd)
    return got


def _feed_stdin(sel: selectors.BaseSelector, stdin_fd: int, pending: memoryview) -> memoryview:
    """Write the next chunk of `pending` to `stdin_fd`; once nothing is left (or the reader is gone), unregister
    and close it. Returns what is still to write."""
    try:
        pending = pending[os.write(stdin_fd, pending[:65536]) :]
    except BlockingIOError:
        return pending
    except BrokenPipeError:
        pending = pending[:0]
    if not pending:
        sel.unregister(stdin_fd)
        os.close(stdin_fd)
    return pending


def _read_output(sel: selectors.BaseSelector, key: selectors.SelectorKey, got: Pumped, max_output_bytes: int) -> bool:
    """Read one chunk of the output fd of `key` into its capture (unregister it at EOF); True, with
    `got.output_too_large` set, once both streams together pass `max_output_bytes`."""
    chunk = os.read(key.fd, 65536)
    if not chunk:
        sel.unregister(key.fd)
        return False
    key.data.feed(chunk)
    if got.stdout.total + got.stderr.total > max_output_bytes:
        got.output_too_large = True
        return True
    return False


def spawn(
    argv: list[str],
    *,
    stdin: bytes,
    cwd: Path,
    env: dict[str, str],
    timeout_s: float,
    keep_bytes: int,
    max_output_bytes: int,
) -> Outcome:
    """Run `argv` in its own session, feed `stdin`, capture head/tail of stdout/stderr; kill the whole
    process group on deadline or flood, and whatever the main process leaves behind when it exits."""
    start = time.monotonic()
    deadline = start + timeout_s
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=env,
        start_new_session=True,
        close_fds=True,
    )
    assert proc.stdin and proc.stdout and proc.stderr
    stdin_fd = os.dup(proc.stdin.fileno())
    proc.stdin.close()
    got = pump(
        stdin_fd=stdin_fd,
        stdin=stdin,
        stdout_fd=proc.stdout.fileno(),
        stderr_fd=proc.stderr.fileno(),
        exited=lambda: proc.poll() is not None,
        kill=lambda: kill_tree(proc),
        deadline=deadline,
        keep_bytes=keep_bytes,
        max_output_bytes=max_output_bytes,
    )
    if not (got.timed_out or got.output_too_large) and proc.poll() is None:
        try:  # pipes closed but the main process still runs: wait for it up to the deadline
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            got.timed_out = True
    kill_tree(proc)
    proc.stdout.close()
    proc.stderr.close()
    returncode = proc.wait()
    return Outcome(
        returncode=returncode,
        duration_s=time.monotonic() - start,
        stdout=got.stdout,
        stderr=got.stderr,
        timed_out=got.timed_out,
        output_too_large=got.output_too_large,
    )
