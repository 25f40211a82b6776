"""Warm tool server run inside the sandbox: `python -m bat.sandbox.toolserver NOTICE [MODULE ...]`.

It imports MODULEs once (e.g. the benchmark's tool modules), prints `{"ready": NOTICE, ...}` and then
serves one call per JSON line on stdin, replying with one JSON line on stdout.  Each call runs in a
forked child (own session, per-call rlimits, its own stdin/stdout/stderr pipes) so a call starts with
everything pre-imported; the server enforces the call's deadline and output cap with the same `pump`
as cold calls, then kills every other process in its pid namespace and empties its scratch dir, so
nothing survives a call.  The server is non-dumpable, so code in a child cannot ptrace it.

Request: {"kind": "tool"|"python"|"bash", "request": <toolhost request> | "argv": [...], "cwd": str,
          "rlimits": {name: value}, "timeout_s", "keep_bytes", "max_output_bytes", "scratch", "reap": bool}
Reply:   {"returncode", "duration_s", "timed_out", "output_too_large", "stdout"|"stderr":
          {"head": base64, "tail": base64, "total": int}}
Stdlib only.
"""

from __future__ import annotations

import base64
import ctypes
import importlib
import json
import os
import resource
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from bat.sandbox import toolhost
from bat.sandbox.spawn import Capture, Pumped, pump

RLIMITS = {
    "as": resource.RLIMIT_AS,
    "cpu": resource.RLIMIT_CPU,
    "nproc": resource.RLIMIT_NPROC,
    "fsize": resource.RLIMIT_FSIZE,
    "nofile": resource.RLIMIT_NOFILE,
    "core": resource.RLIMIT_CORE,
}
PR_SET_DUMPABLE = 4


def _set_limits(limits: dict[str, int]) -> None:
    """Lower this process's rlimits to `limits` (never above the current hard limit)."""
    for name, value in limits.items():
        which = RLIMITS[name]
        _, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        soft = value
        if name == "cpu":
            hard_cpu = value + 1 if hard == resource.RLIM_INFINITY else min(value + 1, hard)
            resource.setrlimit(which, (min(soft, hard_cpu), hard_cpu))
            continue
        resource.setrlimit(which, (soft, value))


def _child(call: dict[str, Any], fds: tuple[int, int, int]) -> None:
    """In the forked child: new session, the call's pipes as 0/1/2, rlimits, then run; never returns."""
    code = 70
    try:
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(3, 65536)
        _set_limits(call.get("rlimits", {}))
        os.chdir(call["cwd"])
        if call["kind"] == "bash":
            os.execvp(call["argv"][0], call["argv"])
        code = toolhost.handle(call["request"])
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def _ancestors() -> set[int]:
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        with open(f"/proc/{pid}/stat", "rb") as handle:
            pid = int(handle.read().rsplit(b")", 1)[1].split()[1])
    return pids | {1}


def _live(pid: int) -> bool:
    """True unless `pid` is gone or a zombie (zombies wait for init to reap them)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def in_own_pid_namespace() -> bool:
    """True inside a bubblewrap pid namespace (pid 1 is bwrap), the only place reaping is safe."""
    try:
        return Path("/proc/1/comm").read_text().strip() == "bwrap"
    except OSError:
        return False


def reap_namespace() -> int:
    """SIGKILL every process in this pid namespace except the server and its ancestors; returns kills.

    Does nothing outside a bwrap pid namespace (there it would hit unrelated processes)."""
    if not in_own_pid_namespace():
        return 0
    keep, killed = _ancestors(), 0
    for _ in range(100):
        others = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in keep and _live(int(p))]
        if not others:
            break
        for pid in others:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        _reap_children()
        time.sleep(0.005)
    return killed


def _reap_children() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _empty(directory: str) -> None:
    """Delete what calls left under `directory` (the scratch), never descending into a file system mounted inside
    it: when the checkout or venv lives under /tmp, its read-only bind mounts sit in the sandbox's /tmp, and walking
    them (to fail on every file) cost ~200 ms a call. A directory that holds such a mount stays. Iterative, so a
    call's arbitrarily deep tree cannot exhaust the server's recursion limit."""
    device = os.lstat(directory).st_dev
    pending, emptied = [directory], []
    while pending:
        path = pending.pop()
        try:
            with os.scandir(path) as scan:
                entries = list(scan)
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_dev != device:
                    continue  # a mount point: not the calls' to delete
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                    emptied.append(entry.path)
                else:
                    os.unlink(entry.path)
            except OSError:
                continue  # vanished meanwhile
    for path in reversed(emptied):  # deepest first
        try:
            os.rmdir(path)
        except OSError:
            pass  # it holds a mount


def _capture(cap: Capture) -> dict[str, Any]:
    return {
        "head": base64.b64encode(bytes(cap.head)).decode(),
        "tail": base64.b64encode(bytes(cap.tail)).decode(),
        "total": cap.total,
    }


def _reply(
    returncode: int,
    start: float,
    stdout: dict[str, Any],
    stderr: dict[str, Any],
    timed_out: bool = False,
    output_too_large: bool = False,
) -> dict[str, Any]:
    """The reply object of a call that began at monotonic time `start`."""
    return {
        "returncode": returncode,
        "duration_s": time.monotonic() - start,
        "timed_out": timed_out,
        "output_too_large": output_too_large,
        "stdout": stdout,
        "stderr": stderr,
    }


def _fork_failed(exc: OSError, start: float) -> dict[str, Any]:
    """The reply when the server could not fork the call's child: exit 1 with the reason on stderr."""
    message = f"tool server could not fork: {exc}\n".encode()
    stderr = {"head": base64.b64encode(message).decode(), "tail": "", "total": len(message)}
    return _reply(1, start, {"head": "", "tail": "", "total": 0}, stderr)


def _supervise(pid: int, call: dict[str, Any], start: float, fds: tuple[int, int, int]) -> tuple[int, Pumped]:
    """Feed the child `pid` its stdin and capture its output through `fds` (stdin write end, stdout and stderr
    read ends) until it exits, its deadline passes or its output overflows; then kill its process group, wait
    for it and close the read ends. Returns (wait status, the `pump` result)."""
    in_w, out_r, err_r = fds
    status: list[int] = []

    def exited() -> bool:
        if not status:
            done, code = os.waitpid(pid, os.WNOHANG)
            if done:
                status.append(code)
        return bool(status)

    def kill() -> None:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    deadline = start + float(call["timeout_s"])
    got = pump(
        stdin_fd=in_w,
        stdin=call.get("stdin", "").encode(),
        stdout_fd=out_r,
        stderr_fd=err_r,
        exited=exited,
        kill=kill,
        deadline=deadline,
        keep_bytes=int(call["keep_bytes"]),
        max_output_bytes=int(call["max_output_bytes"]),
    )
    while not (got.timed_out or got.output_too_large) and not exited():
        if time.monotonic() >= deadline:
            got.timed_out = True
            break
        time.sleep(0.005)
    kill()
    if not status:
        status.append(os.waitpid(pid, 0)[1])
    os.close(out_r)
    os.close(err_r)
    return status[0], got


def serve_call(call: dict[str, Any]) -> dict[str, Any]:
    """Run one call in a forked child; returns the reply object."""
    start = time.monotonic()
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        pid = os.fork()
    except OSError as exc:  # e.g. the process limit is still exhausted
        for fd in (in_r, in_w, out_r, out_w, err_r, err_w):
            os.close(fd)
        return _fork_failed(exc, start)
    if pid == 0:
        for fd in (in_w, out_r, err_r):
            os.close(fd)
        _child(call, (in_r, out_w, err_w))
    for fd in (in_r, out_w, err_w):
        os.close(fd)
    code, got = _supervise(pid, call, start, (in_w, out_r, err_r))
    if call.get("reap"):
        reap_namespace()
    _reap_children()
    if call.get("scratch"):
        _empty(call["scratch"])
    returncode = -os.WTERMSIG(code) if os.WIFSIGNALED(code) else os.WEXITSTATUS(code)
    return _reply(returncode, start, _capture(got.stdout), _capture(got.stderr), got.timed_out, got.output_too_large)


def main(argv: list[str]) -> int:
    """Preload modules, announce readiness, then serve calls until stdin closes."""
    notice, modules = argv[0], argv[1:]
    try:
        ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    errors = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
    sys.stdout.write(json.dumps({"ready": notice, "preload_errors": errors}) + "\n")
    sys.stdout.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = serve_call(json.loads(line))
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
