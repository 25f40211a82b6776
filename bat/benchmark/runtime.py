"""The one place tool calls leave the benchmark: a runner with `call_tool` / `execute_code` -> ExecutionRecord.

`make_runner` returns `bat.sandbox.Sandbox` (isolation runtime from the `sandbox` config section; in warm mode
with no `preload` configured, the benchmark's tool modules are preloaded) or, with
`benchmark.runtime = "inprocess"`, an in-process runner (no isolation: direct calls, same records).
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from bat.sandbox.record import ExecutionRecord, LimitFlags
from bat.sandbox.snapshot import diff, snapshot

if TYPE_CHECKING:
    from bat.config.root import BatConfig


SANDBOX_PRELOAD = (
    "numpy",
    "scipy.ndimage",
    "bat.benchmark.tools.files",
    "bat.benchmark.tools.setup",
    "bat.benchmark.tools.infer",
    "bat.benchmark.tools.submit",
    *(
        f"bat.benchmark.tracks.{t}"
        for t in ("classification", "detection", "enhancement", "report", "segmentation", "synthesis", "vqa")
    ),
)
"""Modules a warm sandbox tool server imports once (used when `sandbox.warm` is on and `sandbox.preload` is empty)."""


class Runner(Protocol):
    """What the environment needs from a runtime."""

    def call_tool(
        self, tool: str, args: dict[str, Any] | None = None, *, stage: str | None = None
    ) -> ExecutionRecord: ...

    def execute_code(self, language: str, code: str, *, stage: str | None = None) -> ExecutionRecord: ...


class InProcessRunner:
    """Direct calls in this process (fast, NOT isolated): used for tests and the scripted-agent suite."""

    name = "inprocess"

    def __init__(self, workspace: Path, timeout_s: float = 10.0) -> None:
        self.workspace = Path(workspace).resolve()
        self.timeout_s = timeout_s

    def call_tool(self, tool: str, args: dict[str, Any] | None = None, *, stage: str | None = None) -> ExecutionRecord:
        """Import `pkg.module:function` and call it with the workspace; an exception becomes `error`."""
        module, func = tool.split(":")
        before, t0 = snapshot(self.workspace), time.perf_counter()
        result, error = None, None
        try:
            result = getattr(importlib.import_module(module), func)(self.workspace, **dict(args or {}))
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        return ExecutionRecord(
            kind="tool",
            tool=tool,
            args=dict(args or {}),
            stage=stage,
            runtime=self.name,
            exit_status=0 if error is None else 1,
            duration_s=time.perf_counter() - t0,
            ok=error is None,
            result=result,
            error=error,
            files_changed=diff(before, snapshot(self.workspace)),
        )

    def execute_code(self, language: str, code: str, *, stage: str | None = None) -> ExecutionRecord:
        """Run code as a child process in the workspace with a timeout (no isolation in this runner)."""
        argv = [sys.executable, "-c", code] if language == "python" else ["bash", "--noprofile", "--norc", "-c", code]
        before, t0 = snapshot(self.workspace), time.perf_counter()
        flags, error, status, out, err = LimitFlags(), None, None, "", ""
        try:
            proc = subprocess.run(
                argv, cwd=self.workspace, capture_output=True, text=True, timeout=self.timeout_s, check=False
            )
            status, out, err = proc.returncode, proc.stdout[-8192:], proc.stderr[-8192:]
            error = None if status == 0 else f"exit status {status}"
        except subprocess.TimeoutExpired:
            flags.timeout, error = True, f"timeout after {self.timeout_s} s"
        return ExecutionRecord(
            kind="code",
            tool="execute_code",
            args={"language": language, "code": code},
            stage=stage,
            runtime=self.name,
            exit_status=status,
            duration_s=time.perf_counter() - t0,
            ok=error is None,
            error=error,
            stdout=out,
            stderr=err,
            files_changed=diff(before, snapshot(self.workspace)),
            flags=flags,
        )


def make_runner(workspace: Path, grader_dir: Path, config: BatConfig) -> Runner:
    """The runner chosen by `config.benchmark.runtime` (sandbox runtime from `config.sandbox`)."""
    if config.benchmark.runtime == "inprocess":
        return InProcessRunner(workspace, timeout_s=config.sandbox.timeout_s)
    from bat.sandbox import Sandbox

    sandbox_cfg = config.sandbox
    if getattr(sandbox_cfg, "warm", False) and not getattr(sandbox_cfg, "preload", ()):
        sandbox_cfg = sandbox_cfg.model_copy(update={"preload": SANDBOX_PRELOAD})
    return Sandbox(workspace, sandbox_cfg, protected_paths=[grader_dir])
