"""Run one argv in its own session with a wall-clock deadline, capped output and whole-tree kill."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
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
    """Run `argv`, feed `stdin`, capture head/tail of stdout/stderr; kill the tree on deadline or flood.

    Once the main process exits, anything it left running in its process group is killed too.
    """
    start = time.monotonic()
    deadline = start + timeout_s
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        cwd=cwd, env=env, start_new_session=True, close_fds=True,
    )
    assert proc.stdin and proc.stdout and proc.stderr
    out, err = Capture(keep_bytes), Capture(keep_bytes)
    timed_out = flooded = False
    pending = memoryview(stdin)
    with selectors.DefaultSelector() as sel:
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            os.set_blocking(stream.fileno(), False)
        if pending:
            sel.register(proc.stdin, selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
        sel.register(proc.stdout, selectors.EVENT_READ, out)
        sel.register(proc.stderr, selectors.EVENT_READ, err)
        exited_at: float | None = None
        while sel.get_map():
            now = time.monotonic()
            if now >= deadline:
                timed_out = True
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
                kill_tree(proc)
            if exited_at is not None and now - exited_at > 1.0:
                break  # a leftover outside the group still holds the pipe; stop waiting for it
            for key, _ in sel.select(timeout=min(0.05 if exited_at is None else 0.1, deadline - now)):
                if key.fileobj is proc.stdin:
                    try:
                        written = os.write(proc.stdin.fileno(), pending[:65536])
                        pending = pending[written:]
                    except (BrokenPipeError, BlockingIOError) as exc:
                        if isinstance(exc, BlockingIOError):
                            continue
                        pending = pending[:0]
                    if not pending:
                        sel.unregister(proc.stdin)
                        proc.stdin.close()
                    continue
                chunk = os.read(key.fileobj.fileno(), 65536)  # type: ignore[union-attr]
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                key.data.feed(chunk)
                if out.total + err.total > max_output_bytes:
                    flooded = True
                    break
            if flooded:
                break
    if not (timed_out or flooded) and proc.poll() is None:
        try:  # pipes closed but the main process still runs: wait for it up to the deadline
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
    kill_tree(proc)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream and not stream.closed:
            stream.close()
    returncode = proc.wait()
    return Outcome(
        returncode=returncode,
        duration_s=time.monotonic() - start,
        stdout=out,
        stderr=err,
        timed_out=timed_out,
        output_too_large=flooded,
    )
