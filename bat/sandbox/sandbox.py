"""`Sandbox`: run trusted tools and untrusted code inside one workspace with one runtime and limits."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bat.config.sandbox import SandboxConfig
from bat.sandbox.classify import classify, extract_report, parse_reply
from bat.sandbox.limits import Limits
from bat.sandbox.record import ExecutionRecord, FilesChanged
from bat.sandbox.runtimes import PythonEnv, get_runtime, python_env
from bat.sandbox.snapshot import contain_symlinks, diff, fingerprint, own_tree, snapshot
from bat.sandbox.spawn import Outcome, spawn

LANGUAGES = ("python", "bash")
MAX_CODE_CHARS = 1_000_000


def _clip(text: str, limit: int) -> tuple[str, bool]:
    """Keep head and tail of `text` within `limit` chars; (text, truncated)."""
    if len(text) <= limit:
        return text, False
    half = limit // 2
    return f"{text[:half]}\n...[{len(text) - 2 * half} chars elided]...\n{text[-half:]}", True


@dataclass
class _Call:
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
class _HostChecks:
    """What the host saw in the workspace and protected paths after the call."""

    changed: FilesChanged
    symlinks: list[str]
    protected_changed: bool


class Sandbox:
    """One workspace + one runtime. Every call returns an ExecutionRecord; none raises for what the
    sandboxed code did (bad arguments from the caller - unknown language, missing workspace - do raise)."""

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        config: SandboxConfig | None = None,
        *,
        protected_paths: list[str | os.PathLike[str]] | tuple[str | os.PathLike[str], ...] = (),
        runtime: str | None = None,
    ) -> None:
        self.config = config or SandboxConfig()
        self.workspace = Path(workspace).resolve()
        if not self.workspace.is_dir():
            raise ValueError(f"workspace {self.workspace} is not a directory")
        self.runtime = get_runtime(runtime or self.config.runtime, self.config)
        self.pyenv: PythonEnv = python_env(self.config.python or sys.executable, tuple(self.config.code_paths))
        self.protected = [str(Path(p).resolve()) for p in protected_paths]
        self._check_protected()
        self.drop_uid = self.config.drop_uid if (self.runtime.name == "bwrap" and os.geteuid() == 0) else None

    def _check_protected(self) -> None:
        """Refuse protected paths that the sandbox could see (inside the workspace or a read-only mount)."""
        visible = [str(self.workspace)]
        if self.runtime.isolates_filesystem:
            visible += list(self.pyenv.roots)
        for path in self.protected:
            for root in visible:
                if path == root or path.startswith(root.rstrip("/") + "/") or root.startswith(path.rstrip("/") + "/"):
                    raise ValueError(f"protected path {path} overlaps {root}, which the sandbox can see; "
                                     "keep grader paths outside the workspace and the code/python trees")

    # public calls ------------------------------------------------------------------------------
    def call_tool(self, tool: str, args: dict[str, Any] | None = None, *, stage: str | None = None,
                  **limit_overrides: float | int) -> ExecutionRecord:
        """Run trusted `pkg.module:function(workspace, **args)` inside the sandbox."""
        limits = Limits.from_config(self.config, **limit_overrides)
        args = dict(args or {})
        request = {"kind": "tool", "tool": tool, "args": args, "max_result_chars": limits.max_output_chars}
        return self._run(_Call("tool", tool, args, stage, request=request), limits)

    def execute_code(self, language: str, code: str, *, stage: str | None = None,
                     **limit_overrides: float | int) -> ExecutionRecord:
        """Run untrusted `code` (`python` or `bash`) inside the sandbox with the workspace as cwd."""
        if language not in LANGUAGES:
            raise ValueError(f"unknown language {language!r}; valid: {list(LANGUAGES)}")
        if not isinstance(code, str) or len(code) > MAX_CODE_CHARS:
            raise ValueError(f"code must be a str of at most {MAX_CODE_CHARS} chars")
        limits = Limits.from_config(self.config, **limit_overrides)
        record_args = {"language": language, "code": code}
        if language == "python":
            call = _Call("code", "execute_code", record_args, stage, request={"kind": "python", "code": code})
        else:
            call = _Call("code", "execute_code", record_args, stage, bash_argv=["bash", "--noprofile", "--norc", "-c", code])
        return self._run(call, limits)

    # internals --------------------------------------------------------------------------------
    def _env(self, inner_ws: str, inner_scratch: str) -> dict[str, str]:
        python_dir = str(Path(self.runtime.inner_python(self.pyenv)).parent)
        path = ":".join(p for p in (python_dir if python_dir != "." else "", "/usr/local/bin", "/usr/bin", "/bin") if p)
        return {
            "PATH": path, "HOME": inner_scratch, "TMPDIR": inner_scratch, "MPLCONFIGDIR": inner_scratch,
            "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONPATH": ":".join(self.pyenv.pythonpath),
            "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONSAFEPATH": "1", "PYTHONUNBUFFERED": "1",
            "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "BAT_WORKSPACE": inner_ws,
        }

    def _watch(self, inner_ws: str, inner_scratch: str) -> dict[str, list[str]]:
        readable = [inner_ws, inner_scratch, *self.runtime.visible_roots(self.pyenv)]
        return {"readable": readable, "writable": [inner_ws, inner_scratch, "/dev"], "protected": self.protected}

    def _run(self, call: _Call, limits: Limits) -> ExecutionRecord:
        """Prepare ownership and snapshots, spawn through the runtime, run host checks, build the record."""
        if self.drop_uid is not None:
            own_tree(self.workspace, self.drop_uid, self.drop_uid)
        before = snapshot(self.workspace)
        protected_before = fingerprint(self.protected) if self.protected else ""
        scratch = Path(tempfile.mkdtemp(prefix="bat-sandbox-"))
        if self.drop_uid is not None:
            os.chown(scratch, self.drop_uid, self.drop_uid)
        inner_ws = self.runtime.inner_workspace(self.workspace)
        inner_scratch = self.runtime.inner_scratch(scratch)
        if call.request is not None:
            call.marker = f"@@bat-toolhost-report-{secrets.token_hex(8)}@@"
            request = {**call.request, "workspace": inner_ws, "watch": self._watch(inner_ws, inner_scratch),
                       "report_marker": call.marker}
            inner = [self.runtime.inner_python(self.pyenv), "-m", "bat.sandbox.toolhost"]
            stdin, cwd = json.dumps(request).encode("utf-8"), inner_scratch
        else:
            inner, stdin, cwd = call.bash_argv, b"", inner_ws
        try:
            argv = self.runtime.argv(inner, workspace=self.workspace, scratch=scratch, cwd=cwd, limits=limits,
                                     pyenv=self.pyenv, drop_uid=self.drop_uid or 0)
            outcome = spawn(argv, stdin=stdin, cwd=scratch, env=self._env(inner_ws, inner_scratch),
                            timeout_s=limits.timeout_s, keep_bytes=8 * limits.max_output_chars + 65536,
                            max_output_bytes=limits.max_output_bytes)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        symlinks = contain_symlinks(self.workspace, inner_ws if inner_ws != str(self.workspace) else None)
        host = _HostChecks(changed=diff(before, snapshot(self.workspace)), symlinks=symlinks,
                           protected_changed=bool(self.protected) and fingerprint(self.protected) != protected_before)
        return self._record(call, limits, outcome, host)

    def _record(self, call: _Call, limits: Limits, outcome: Outcome, host: _HostChecks) -> ExecutionRecord:
        """Assemble the ExecutionRecord from the outcome, the tool host's reply/report and host checks."""
        kind = call.kind
        stdout_raw, stdout_lost = outcome.stdout.text()
        stderr_raw, stderr_lost = outcome.stderr.text()
        reply = parse_reply(stdout_raw) if kind == "tool" else None
        report = reply
        if kind == "code" and call.marker:
            stderr_raw, report = extract_report(stderr_raw, call.marker)
        verdict = classify(outcome, limits=limits, wrapped=self.runtime.isolates_filesystem, stdout=stdout_raw,
                           stderr=stderr_raw, report=report, protected=self.protected,
                           protected_changed=host.protected_changed, symlink_evidence=host.symlinks)
        error = None
        if report and report.get("error"):
            error = str(report["error"])
        elif kind == "tool" and reply is None:
            error = "tool host gave no reply" + (f" ({', '.join(verdict.flags.raised())})" if verdict.flags.raised() else "")
        elif verdict.exit_status not in (0, None) or verdict.signal is not None:
            error = f"exit status {verdict.exit_status}" if verdict.signal is None else f"killed by signal {verdict.signal}"
        stdout_text = "" if kind == "tool" else stdout_raw
        stdout, stdout_cut = _clip(stdout_text, limits.max_output_chars)
        stderr, stderr_cut = _clip(stderr_raw, limits.max_output_chars)
        ok = (verdict.exit_status == 0 and error is None and not verdict.flags.limited and not verdict.flags.breach
              and (kind == "code" or bool(reply and reply.get("ok"))))
        return ExecutionRecord(
            kind=kind, tool=call.tool, args=call.args, stage=call.stage, runtime=self.runtime.name,
            exit_status=verdict.exit_status, signal=verdict.signal, duration_s=round(outcome.duration_s, 6), ok=ok,
            result=(reply or {}).get("result") if kind == "tool" else None, error=error,
            error_type=str(report["error_type"]) if report and report.get("error_type") else None,
            stdout=stdout, stderr=stderr,
            stdout_truncated=stdout_cut or (kind == "code" and stdout_lost), stderr_truncated=stderr_cut or stderr_lost,
            files_changed=host.changed, flags=verdict.flags, evidence=verdict.evidence,
        )

