"""After a sandboxed call: the host-side checks of the workspace, and the call's `ExecutionRecord`.

Reads the workspace (snapshots, symlinks, special files, size), the protected paths' fingerprint, and what the
call left behind (`Outcome`: exit status, captured stdout/stderr with the tool host's reply or report). Removes
escaping symlinks and special files from the workspace; writes nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bat.sandbox.classify import Verdict, classify, extract_report, parse_reply
from bat.sandbox.limits import Limits
from bat.sandbox.record import ExecutionRecord, FilesChanged
from bat.sandbox.snapshot import (
    Snapshot,
    contain_symlinks,
    diff,
    fingerprint,
    remove_special_files,
    snapshot,
    total_bytes,
)
from bat.sandbox.spawn import Outcome


@dataclass
class PendingCall:
    """One pending call: what to record about it and how to start it."""

    kind: str
    tool: str
    args: dict[str, Any]
    stage: str | None
    request: dict[str, Any] | None = None
    """Tool-host request (tools and python code); None for bash."""
    bash_argv: list[str] = field(default_factory=list)
    marker: str = ""


@dataclass
class HostChecks:
    """What the host saw in the workspace and protected paths after the call."""

    changed: FilesChanged
    symlinks: list[str]
    cleaned: list[str]
    """Special files (FIFOs, sockets, devices) removed after the call."""
    oversize: str
    """Non-empty when the workspace outgrew `max_workspace_mb`."""
    protected_changed: bool


def check_host(
    workspace: Path,
    inner_ws: str,
    before: Snapshot,
    protected: list[str],
    protected_before: str,
    limits: Limits,
) -> HostChecks:
    """Contain the workspace after a call (escaping symlinks and special files removed) and compare it with the
    snapshot `before`, its size with `limits.max_workspace_mb`, the protected paths with `protected_before`."""
    symlinks = contain_symlinks(workspace, inner_ws if inner_ws != str(workspace) else None)
    cleaned = remove_special_files(workspace)
    after = snapshot(workspace)
    size_mb = total_bytes(after) / (1024 * 1024)
    return HostChecks(
        changed=diff(before, after),
        symlinks=symlinks,
        cleaned=cleaned,
        oversize=f"workspace holds {size_mb:.0f} MiB > {limits.max_workspace_mb} MiB"
        if size_mb > limits.max_workspace_mb
        else "",
        protected_changed=bool(protected) and fingerprint(protected) != protected_before,
    )


def clip(text: str, limit: int) -> tuple[str, bool]:
    """Keep head and tail of `text` within `limit` chars; (text, truncated)."""
    if len(text) <= limit:
        return text, False
    half = limit // 2
    return f"{text[:half]}\n...[{len(text) - 2 * half} chars elided]...\n{text[-half:]}", True


def build_record(
    call: PendingCall,
    limits: Limits,
    outcome: Outcome,
    host: HostChecks,
    *,
    runtime: str,
    wrapped: bool,
    protected: list[str],
) -> ExecutionRecord:
    """Assemble the ExecutionRecord from the outcome, the tool host's reply/report and host checks; `wrapped`
    when exit statuses pass through the runtime's wrapper (cold calls of an isolating runtime)."""
    kind = call.kind
    stdout_raw, stdout_lost = outcome.stdout.text()
    stderr_raw, stderr_lost = outcome.stderr.text()
    reply = parse_reply(stdout_raw) if kind == "tool" else None
    report = reply
    if kind == "code" and call.marker:
        stderr_raw, report = extract_report(stderr_raw, call.marker)
    verdict = _classify(outcome, limits, host, wrapped, protected, stdout_raw, stderr_raw, report)
    error = _error(kind, reply, report, verdict)
    stdout, stdout_cut = clip("" if kind == "tool" else stdout_raw, limits.max_output_chars)
    stderr, stderr_cut = clip(stderr_raw, limits.max_output_chars)
    ok = (
        verdict.exit_status == 0
        and error is None
        and not verdict.flags.limited
        and not verdict.flags.breach
        and (kind == "code" or bool(reply and reply.get("ok")))
    )
    return ExecutionRecord(
        kind=kind,
        tool=call.tool,
        args=call.args,
        stage=call.stage,
        runtime=runtime,
        exit_status=verdict.exit_status,
        signal=verdict.signal,
        duration_s=round(outcome.duration_s, 6),
        ok=ok,
        result=(reply or {}).get("result") if kind == "tool" else None,
        error=error,
        error_type=str(report["error_type"]) if report and report.get("error_type") else None,
        stdout=stdout,
        stderr=stderr,
        stdout_truncated=stdout_cut or (kind == "code" and stdout_lost),
        stderr_truncated=stderr_cut or stderr_lost,
        files_changed=host.changed,
        flags=verdict.flags,
        evidence=verdict.evidence,
    )


def _classify(
    outcome: Outcome,
    limits: Limits,
    host: HostChecks,
    wrapped: bool,
    protected: list[str],
    stdout: str,
    stderr: str,
    report: dict[str, Any] | None,
) -> Verdict:
    """The call's flags and evidence (`classify`), plus the host checks' oversize flag and cleaned files."""
    verdict = classify(
        outcome,
        limits=limits,
        wrapped=wrapped,
        stdout=stdout,
        stderr=stderr,
        report=report,
        protected=protected,
        protected_changed=host.protected_changed,
        symlink_evidence=host.symlinks,
    )
    if host.oversize:
        verdict.raise_flag("file_size", host.oversize)
    verdict.evidence.extend(host.cleaned)
    return verdict


def _error(kind: str, reply: dict[str, Any] | None, report: dict[str, Any] | None, verdict: Verdict) -> str | None:
    """The record's error: the tool host's reported error, else a missing tool reply (with the raised flags),
    else the killing signal or a non-zero exit status; None when the call ended cleanly."""
    if report and report.get("error"):
        return str(report["error"])
    if kind == "tool" and reply is None:
        raised = verdict.flags.raised()
        return "tool host gave no reply" + (f" ({', '.join(raised)})" if raised else "")
    if verdict.signal is not None:
        return f"killed by signal {verdict.signal}"
    if verdict.exit_status != 0:
        return f"exit status {verdict.exit_status}"
    return None
