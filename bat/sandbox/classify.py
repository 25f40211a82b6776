"""Turn what a finished call left behind (exit status, output, audit events, host checks) into flags.

Only recording happens here; containment already happened in the runtime.  Error-text patterns are
read from the call's stderr (what the kernel/libc reported), never from the submitted code.
"""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass, field
from typing import Any

from bat.sandbox.limits import Limits
from bat.sandbox.record import LimitFlags
from bat.sandbox.spawn import Outcome

PATTERNS: dict[str, tuple[str, ...]] = {
    "memory": ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory"),
    "nproc": (
        "fork: retry: Resource temporarily unavailable",
        "fork: Resource temporarily unavailable",
        "BlockingIOError: [Errno 11]",
        "can't start new thread",
    ),
    "file_size": ("File too large", "[Errno 27]"),
    "access_outside": ("Read-only file system",),
    "network": (
        "Network is unreachable",
        "Temporary failure in name resolution",
        "Name or service not known",
        "Could not resolve host",
    ),
}
ERROR_TYPES = {"MemoryError": "memory", "BlockingIOError": "nproc"}


@dataclass
class Verdict:
    """Flags plus one evidence line per observation, and the exit status split into code/signal."""

    flags: LimitFlags = field(default_factory=LimitFlags)
    evidence: list[str] = field(default_factory=list)
    exit_status: int | None = None
    signal: int | None = None

    def raise_flag(self, name: str, why: str) -> None:
        setattr(self.flags, name, True)
        if why not in self.evidence:
            self.evidence.append(why)


def split_status(returncode: int, wrapped: bool) -> tuple[int | None, int | None]:
    """(exit code, signal) from a Popen return code; `wrapped` runtimes report signals as 128+N."""
    if returncode < 0:
        return None, -returncode
    if wrapped and 128 < returncode < 128 + 65:
        return None, returncode - 128
    return returncode, None


def extract_report(stderr: str, marker: str) -> tuple[str, dict[str, Any] | None]:
    """Split the tool host's report line (after `marker`) off stderr; (clean stderr, report or None)."""
    index = stderr.rfind(marker)
    if not marker or index < 0:
        return stderr, None
    line = stderr[index + len(marker) :].split("\n", 1)[0]
    clean = "\n".join(part for part in stderr.split("\n") if marker not in part).rstrip("\n")
    try:
        report = json.loads(line)
    except json.JSONDecodeError:
        return clean, None
    return clean, report if isinstance(report, dict) else None


def parse_reply(stdout: str) -> dict[str, Any] | None:
    """The tool host's JSON reply: the last non-empty stdout line, or None when absent/garbled."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        return None
    try:
        reply = json.loads(lines[-1])
    except json.JSONDecodeError:
        return None
    return reply if isinstance(reply, dict) else None


def classify(
    outcome: Outcome,
    *,
    limits: Limits,
    wrapped: bool,
    stdout: str,
    stderr: str,
    report: dict[str, Any] | None,
    protected: list[str],
    protected_changed: bool,
    symlink_evidence: list[str],
) -> Verdict:
    """Flags and evidence for one call (see module docstring for the sources)."""
    verdict = Verdict()
    verdict.exit_status, verdict.signal = split_status(outcome.returncode, wrapped)
    if outcome.timed_out:
        verdict.raise_flag("timeout", f"wall-clock limit {limits.timeout_s:g} s reached; process tree killed")
    if outcome.output_too_large:
        verdict.raise_flag("output_too_large", f"output exceeded {limits.max_output_bytes} bytes; process tree killed")
    sig = verdict.signal
    if sig == signal.SIGXCPU:  # the soft RLIMIT_CPU; the hard one (+1 s) only hits code that ignores it
        verdict.raise_flag("cpu", f"cpu limit {limits.cpu_s} s reached (SIGXCPU)")
    if sig == signal.SIGXFSZ:
        verdict.raise_flag("file_size", f"file size limit {limits.max_file_mb} MiB reached (SIGXFSZ)")
    for name, needles in PATTERNS.items():
        for needle in needles:
            if needle in stderr:
                verdict.raise_flag(name, f"stderr reports {needle!r}")
                break
    if report:
        kind = ERROR_TYPES.get(str(report.get("error_type")))
        if kind:
            verdict.raise_flag(kind, f"tool host caught {report.get('error_type')}")
        for event in report.get("events") or []:
            if isinstance(event, dict) and event.get("kind") in ("access_outside", "network"):
                verdict.raise_flag(str(event["kind"]), f"audit: {event.get('detail', '')}"[:300])
    for path in protected:
        if path in stdout or path in stderr:
            verdict.raise_flag("access_outside", f"output mentions protected path {path}")
    if protected_changed:
        verdict.raise_flag("access_outside", "a protected path changed during the call")
    for line in symlink_evidence:
        verdict.raise_flag("symlink_escape", line)
    return verdict
