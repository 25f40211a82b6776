"""`Sandbox`: run trusted tools and untrusted code inside one workspace with one runtime and limits."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from bat.config.sandbox import SandboxConfig
from bat.sandbox.call_record import PendingCall, build_record, check_host
from bat.sandbox.limits import Limits
from bat.sandbox.record import ExecutionRecord
from bat.sandbox.runtimes import PythonEnv, get_runtime, python_env
from bat.sandbox.snapshot import fingerprint, own_tree, snapshot
from bat.sandbox.spawn import Outcome, spawn
from bat.sandbox.warm import ServerBootError, WarmServer

LANGUAGES = ("python", "bash")
MAX_CODE_CHARS = 1_000_000


class SandboxBootError(RuntimeError):
    """The isolation runtime itself failed to start (infrastructure, not the agent's doing)."""


def _keep(limits: Limits) -> int:
    """Raw bytes kept at each end of a stream (the record keeps `max_output_chars` of them)."""
    return 8 * limits.max_output_chars + 65536


def boot_shim(notice: str) -> list[str]:
    """`sh` prefix that prints `notice` on stderr once inside the sandbox, then execs the command."""
    return ["sh", "-c", 'printf "%s\\n" "$0" >&2; exec "$@"', notice]


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
        self._warm: WarmServer | None = None

    def _check_protected(self) -> None:
        """Refuse protected paths that the sandbox could see (inside the workspace or a read-only mount)."""
        visible = [str(self.workspace)]
        if self.runtime.isolates_filesystem:
            visible += list(self.pyenv.roots)
        for path in self.protected:
            for root in visible:
                if path == root or path.startswith(root.rstrip("/") + "/") or root.startswith(path.rstrip("/") + "/"):
                    raise ValueError(
                        f"protected path {path} overlaps {root}, which the sandbox can see; "
                        "keep grader paths outside the workspace and the code/python trees"
                    )

    # public calls ------------------------------------------------------------------------------
    def call_tool(
        self, tool: str, args: dict[str, Any] | None = None, *, stage: str | None = None, **limit_overrides: float | int
    ) -> ExecutionRecord:
        """Run trusted `pkg.module:function(workspace, **args)` inside the sandbox."""
        limits = Limits.from_config(self.config, **limit_overrides)
        args = dict(args or {})
        request = {"kind": "tool", "tool": tool, "args": args, "max_result_chars": limits.max_output_chars}
        return self._run(PendingCall("tool", tool, args, stage, request=request), limits)

    def execute_code(
        self, language: str, code: str, *, stage: str | None = None, **limit_overrides: float | int
    ) -> ExecutionRecord:
        """Run untrusted `code` (`python` or `bash`) inside the sandbox with the workspace as cwd."""
        if language not in LANGUAGES:
            raise ValueError(f"unknown language {language!r}; valid: {list(LANGUAGES)}")
        if not isinstance(code, str) or len(code) > MAX_CODE_CHARS:
            raise ValueError(f"code must be a str of at most {MAX_CODE_CHARS} chars")
        limits = Limits.from_config(self.config, **limit_overrides)
        record_args = {"language": language, "code": code}
        if language == "python":
            call = PendingCall("code", "execute_code", record_args, stage, request={"kind": "python", "code": code})
        else:
            bash = ["bash", "--noprofile", "--norc", "-c", code]
            call = PendingCall("code", "execute_code", record_args, stage, bash_argv=bash)
        return self._run(call, limits)

    # internals --------------------------------------------------------------------------------
    def _env(self, inner_ws: str, inner_scratch: str) -> dict[str, str]:
        python_dir = str(Path(self.runtime.inner_python(self.pyenv)).parent)
        path = ":".join(p for p in (python_dir if python_dir != "." else "", "/usr/local/bin", "/usr/bin", "/bin") if p)
        return {
            "PATH": path,
            "HOME": inner_scratch,
            "TMPDIR": inner_scratch,
            "MPLCONFIGDIR": inner_scratch,
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "PYTHONPATH": ":".join(self.pyenv.pythonpath),
            "PYTHONHASHSEED": "0",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "BAT_WORKSPACE": inner_ws,
        }

    def _watch(self, inner_ws: str, inner_scratch: str) -> dict[str, list[str]]:
        readable = [inner_ws, inner_scratch, *self.runtime.visible_roots(self.pyenv)]
        return {"readable": readable, "writable": [inner_ws, inner_scratch, "/dev"], "protected": self.protected}

    def _scratch(self) -> Path:
        """A fresh host temp dir for one call (cold) or one server (warm), owned by the sandbox uid."""
        scratch = Path(tempfile.mkdtemp(prefix="bat-sandbox-"))
        if self.drop_uid is not None:
            os.chown(scratch, self.drop_uid, self.drop_uid)
        return scratch

    def _prepare(self, call: PendingCall, inner_ws: str, inner_scratch: str) -> dict[str, Any] | None:
        """The tool-host request for `call` (with workspace, watch lists and report marker), or None."""
        if call.request is None:
            return None
        call.marker = f"@@bat-toolhost-report-{secrets.token_hex(8)}@@"
        return {
            **call.request,
            "workspace": inner_ws,
            "watch": self._watch(inner_ws, inner_scratch),
            "report_marker": call.marker,
        }

    def _run_cold(self, call: PendingCall, limits: Limits, inner_ws: str) -> Outcome:
        """One fresh sandbox for this call: boot shim + tool host or bash under the runtime."""
        scratch = self._scratch()
        inner_scratch = self.runtime.inner_scratch(scratch)
        request = self._prepare(call, inner_ws, inner_scratch)
        if request is not None:
            inner = [self.runtime.inner_python(self.pyenv), "-m", "bat.sandbox.toolhost"]
            stdin, cwd = json.dumps(request).encode("utf-8"), inner_scratch
        else:
            inner, stdin, cwd = call.bash_argv, b"", inner_ws
        boot = f"@@bat-sandbox-booted-{secrets.token_hex(8)}@@"
        try:
            argv = self.runtime.argv(
                [*boot_shim(boot), *inner],
                workspace=self.workspace,
                scratch=scratch,
                cwd=cwd,
                limits=limits,
                pyenv=self.pyenv,
                drop_uid=self.drop_uid or 0,
            )
            outcome = spawn(
                argv,
                stdin=stdin,
                cwd=scratch,
                env=self._env(inner_ws, inner_scratch),
                timeout_s=limits.timeout_s,
                keep_bytes=_keep(limits),
                max_output_bytes=limits.max_output_bytes,
            )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        self._check_boot(boot, outcome)
        return outcome

    def _server(self, inner_ws: str) -> WarmServer:
        """The warm server for this workspace, (re)started when missing, dead or bound to an old directory."""
        if self._warm is not None and self._warm.usable():
            return self._warm
        self.close()
        scratch = self._scratch()
        inner_scratch = self.runtime.inner_scratch(scratch)

        def argv_for(inner: list[str], host_scratch: Path, limits: Limits) -> list[str]:
            return self.runtime.argv(
                inner,
                workspace=self.workspace,
                scratch=host_scratch,
                cwd=inner_scratch,
                limits=limits,
                pyenv=self.pyenv,
                drop_uid=self.drop_uid or 0,
            )

        try:
            self._warm = WarmServer(
                argv_for=argv_for,
                env=self._env(inner_ws, inner_scratch),
                python=self.runtime.inner_python(self.pyenv),
                preload=tuple(self.config.preload),
                workspace=self.workspace,
                limits=Limits.from_config(self.config),
                scratch=scratch,
            )
        except ServerBootError as exc:
            shutil.rmtree(scratch, ignore_errors=True)
            raise SandboxBootError(str(exc)) from exc
        return self._warm

    def _run_warm(self, call: PendingCall, limits: Limits, inner_ws: str) -> Outcome:
        """Fork the call from the warm server (boot checked once when the server started)."""
        server = self._server(inner_ws)
        inner_scratch = self.runtime.inner_scratch(server.scratch)
        request = self._prepare(call, inner_ws, inner_scratch)
        mib = 1024 * 1024
        payload = {
            "kind": call.request["kind"] if call.request is not None else "bash",
            "request": request,
            "argv": call.bash_argv,
            "cwd": inner_ws if request is None else inner_scratch,
            "rlimits": {
                "as": limits.memory_mb * mib,
                "cpu": limits.cpu_s,
                "nproc": limits.nproc,
                "fsize": limits.max_file_mb * mib,
                "nofile": limits.nofile,
                "core": 0,
            },
            "timeout_s": limits.timeout_s,
            "keep_bytes": _keep(limits),
            "max_output_bytes": limits.max_output_bytes,
            "scratch": inner_scratch,
            "reap": self.runtime.name == "bwrap",
        }
        return server.call(payload, limits.timeout_s, _keep(limits))

    def close(self) -> None:
        """Stop the warm server, if one runs (cold sandboxes hold nothing)."""
        if self._warm is not None:
            self._warm.close()
            self._warm = None

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, call: PendingCall, limits: Limits) -> ExecutionRecord:
        """Prepare ownership and snapshots, run cold or warm, run host checks, build the record."""
        if self.drop_uid is not None:
            own_tree(self.workspace, self.drop_uid, self.drop_uid)
        before = snapshot(self.workspace)
        protected_before = fingerprint(self.protected) if self.protected else ""
        inner_ws = self.runtime.inner_workspace(self.workspace)
        if self.config.warm:
            outcome = self._run_warm(call, limits, inner_ws)
        else:
            outcome = self._run_cold(call, limits, inner_ws)
        host = check_host(self.workspace, inner_ws, before, self.protected, protected_before, limits)
        wrapped = self.runtime.isolates_filesystem and not self.config.warm  # warm statuses come from waitpid
        return build_record(
            call, limits, outcome, host, runtime=self.runtime.name, wrapped=wrapped, protected=self.protected
        )

    def _check_boot(self, boot: str, outcome: Outcome) -> None:
        """Strip the boot notice from stderr; raise SandboxBootError when it never came (infrastructure).

        The notice is the first line the shim writes inside the sandbox, before any agent code runs,
        so sandboxed code can neither fake a boot failure nor hide a successful boot."""
        head = bytes(outcome.stderr.head)
        line = boot.encode() + b"\n"
        index = head.find(line)
        if index < 0:
            detail = outcome.stderr.text()[0].strip()[-500:]
            raise SandboxBootError(
                f"runtime {self.runtime.name!r} did not start the sandbox "
                f"(exit {outcome.returncode}): {detail or 'no error output'}"
            )
        del outcome.stderr.head[index : index + len(line)]
        outcome.stderr.total -= len(line)
