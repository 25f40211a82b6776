"""Tool host run inside the sandbox: `python -m bat.sandbox.toolhost` (stdlib only, so it starts fast).

Reads one JSON request on stdin:
  {"kind": "tool", "tool": "pkg.module:function", "args": {...}, "workspace": "/workspace",
   "max_result_chars": 8192, "watch": {"readable": [...], "writable": [...], "protected": [...]}}
  {"kind": "python", "code": "...", "workspace": ..., "watch": {...}, "report_marker": "..."}

`tool`: calls `function(pathlib.Path(workspace), **args)` with the tool's own prints sent to stderr, and
writes one JSON object on stdout: {"ok", "result", "error", "error_type", "truncated", "events"}.
`python`: executes untrusted code as `__main__` (its stdout is the real stdout) and appends one line
`<report_marker>{"ok", "error", "error_type", "events"}` to stderr.

`events` lists what a Python audit hook saw: reads of protected paths, writes outside the writable
roots, reads outside the sandbox's view, internet sockets.  The hook only records; containment comes
from the runtime (bubblewrap namespaces, rlimits), never from this process.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib
import json
import os
import re
import socket
import sys
import traceback
from pathlib import Path
from typing import Any

TOOL_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")
SYSTEM_PREFIXES = ("/etc", "/sys", "/proc", "/dev", "/usr", "/lib", "/lib64", "/bin", "/sbin", "/run")
MAX_EVENTS = 20
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_NET_FAMILIES = {int(socket.AF_INET), int(socket.AF_INET6)}


def _under(path: str, roots: list[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


class AuditRecorder:
    """Collects escape attempts from Python audit events (records only; never blocks)."""

    def __init__(self, watch: dict[str, list[str]]) -> None:
        self.readable = [os.path.normpath(p) for p in watch.get("readable", ["/"])]
        self.writable = [os.path.normpath(p) for p in watch.get("writable", ["/"])]
        self.protected = [os.path.normpath(p) for p in watch.get("protected", [])]
        self.events: list[dict[str, str]] = []
        self._busy = False

    def _add(self, kind: str, detail: str) -> None:
        if len(self.events) < MAX_EVENTS and {"kind": kind, "detail": detail} not in self.events:
            self.events.append({"kind": kind, "detail": detail})

    def _on_open(self, path: Any, mode: Any, flags: Any) -> None:
        if isinstance(path, int) or path is None:
            return
        full = os.path.normpath(os.path.abspath(os.fsdecode(path)))
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and mode is None and bool(flags & _WRITE_FLAGS)
        )
        if _under(full, self.protected):
            self._add("access_outside", f"open {'for write ' if writing else ''}of protected path {full}")
        elif writing and not _under(full, self.writable):
            self._add("access_outside", f"open for write outside the workspace: {full}")
        elif not writing and not _under(full, self.readable) and not _under(full, list(SYSTEM_PREFIXES)):
            self._add("access_outside", f"read outside the sandbox view: {full}")

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if self._busy:
            return
        self._busy = True
        try:
            if event == "open" and args:
                self._on_open(args[0], args[1] if len(args) > 1 else None, args[2] if len(args) > 2 else None)
            elif event == "socket.__new__" and len(args) >= 2 and int(args[1]) in _NET_FAMILIES:
                self._add("network", f"opened an internet socket (family {int(args[1])})")
            elif event in ("socket.connect", "socket.sendto") and len(args) >= 2:
                address = args[1]
                if isinstance(address, (str, bytes)):
                    self._on_open(address, "r", None)
                else:
                    self._add("network", f"{event} to {address!r}")
            elif event in ("socket.getaddrinfo", "socket.gethostbyname"):
                self._add("network", f"{event} {args[0]!r}")
        except Exception:  # a recorder must never break the call it observes
            pass
        finally:
            self._busy = False


def resolve_tool(name: str) -> Any:
    """Import `pkg.module:function`; ValueError says what shape is valid."""
    if not isinstance(name, str) or not TOOL_NAME_RE.match(name):
        raise ValueError(f"tool name {name!r} must look like 'pkg.module:function'")
    module_name, func_name = name.split(":")
    module = importlib.import_module(module_name)
    func = getattr(module, func_name, None)
    if not callable(func):
        public = sorted(
            n
            for n, v in vars(module).items()
            if not n.startswith("_") and callable(v) and getattr(v, "__module__", None) == module_name
        )
        raise ValueError(f"{module_name} has no callable {func_name!r}; callables there: {public}")
    return func


def _cap_text(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = max(limit // 2, 1)
    return text[:half] + f"\n...[{len(text) - 2 * half} chars elided]...\n" + text[-half:]


def _cap_leaves(value: Any, limit: int) -> Any:
    """Copy of a JSON value with every string leaf capped to `limit` chars."""
    if isinstance(value, str):
        return _cap_text(value, limit)
    if isinstance(value, dict):
        return {key: _cap_leaves(item, limit) for key, item in value.items()}
    if isinstance(value, list):
        return [_cap_leaves(item, limit) for item in value]
    return value


def _cap_result(result: Any, limit: int) -> tuple[Any, bool]:
    """Return (JSON-safe result within ~`limit` chars, truncated?). Text keeps head and tail; objects
    keep their shape with long strings shortened, and become capped JSON text only as a last resort."""
    if isinstance(result, str):
        return _cap_text(result, limit), len(result) > limit
    if len(json.dumps(result, sort_keys=True)) <= limit:
        return result, False
    for leaf_limit in (limit // 2, limit // 8, limit // 32):
        capped = _cap_leaves(result, leaf_limit)
        if len(json.dumps(capped, sort_keys=True)) <= limit:
            return capped, True
    return _cap_text(json.dumps(result, sort_keys=True), limit), True


def _error_fields(exc: BaseException) -> dict[str, str]:
    return {"error": f"{type(exc).__name__}: {exc}"[:2000], "error_type": type(exc).__name__}


def _print_traceback(exc: BaseException) -> None:
    """Print the traceback to stderr without the tool host's own frame."""
    tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
    traceback.print_exception(type(exc), exc, tb, file=sys.stderr)


def run_tool(request: dict[str, Any], recorder: AuditRecorder) -> dict[str, Any]:
    """Call the requested tool function; returns the reply object (never raises for tool errors)."""
    reply: dict[str, Any] = {"ok": False, "result": None, "error": None, "error_type": None, "truncated": False}
    try:
        func = resolve_tool(request.get("tool"))
        args = request.get("args") or {}
        if not isinstance(args, dict):
            raise TypeError(f"tool arguments must be a JSON object, got {type(args).__name__}")
        with contextlib.redirect_stdout(sys.stderr):
            result = func(Path(request["workspace"]), **args)
        json.dumps(result)
        reply["result"], reply["truncated"] = _cap_result(result, int(request.get("max_result_chars", 8192)))
        reply["ok"] = True
    except BaseException as exc:
        reply.update(_error_fields(exc))
        _print_traceback(exc)
    reply["events"] = recorder.events
    return reply


def run_python(request: dict[str, Any], recorder: AuditRecorder) -> tuple[int, dict[str, Any]]:
    """Execute untrusted code as __main__; returns (exit code, report)."""
    report: dict[str, Any] = {"ok": True, "error": None, "error_type": None}
    code = 0
    try:
        compiled = compile(request.get("code", ""), "<execute_code>", "exec")
        exec(compiled, {"__name__": "__main__", "__builtins__": builtins})
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        report["ok"] = code == 0
    except BaseException as exc:
        _print_traceback(exc)
        report.update(ok=False, **_error_fields(exc))
        code = 1
    report["events"] = recorder.events
    return code, report


def main() -> int:
    """Entry point: one request in, one reply out; exit 0 unless the request itself is malformed."""
    try:
        request = json.loads(sys.stdin.read())
        if not isinstance(request, dict) or request.get("kind") not in ("tool", "python"):
            raise ValueError("request must be a JSON object with kind 'tool' or 'python'")
    except ValueError as exc:
        print(json.dumps({"ok": False, "error": f"bad request: {exc}", "error_type": "BadRequest"}))
        return 2
    return handle(request)


def handle(request: dict[str, Any]) -> int:
    """Serve one validated request in this process (chdir, audit hook, run); returns the exit code."""
    workspace = request.get("workspace") or os.getcwd()
    os.chdir(workspace)
    sys.path[:0] = [workspace] if request["kind"] == "python" else []
    recorder = AuditRecorder(request.get("watch") or {})
    sys.addaudithook(recorder)
    if request["kind"] == "tool":
        reply = run_tool(request, recorder)
        sys.stdout.write(json.dumps(reply, sort_keys=True) + "\n")
        sys.stdout.flush()
        return 0
    host_pid = os.getpid()
    code, report = run_python(request, recorder)
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    if os.getpid() != host_pid:  # a child forked by the code: only the host process reports
        os._exit(code)
    sys.stderr.write("\n" + str(request.get("report_marker", "")) + json.dumps(report, sort_keys=True) + "\n")
    sys.stderr.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())
