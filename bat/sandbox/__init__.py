"""Workspaces from state packages, and tool/code execution inside an isolation runtime.

Public API (import from `bat.sandbox`):

* State packages (the `p` of a Stage Bank row):
  `build_package(src_dir, dest_dir, metadata: dict) -> PackageManifest` copies a directory of plain
  files into `dest_dir/files/` and writes `dest_dir/package.json` (file list, sha256 digest, metadata);
  `load_package(dest_dir) -> PackageManifest`; `tree_digest(dir) -> str`.
* Workspaces: `Workspace.materialise(package_dir, workspace_dir) -> Workspace` makes a fresh copy and
  checks it against the package digest (`DigestMismatchError` otherwise); `ws.reset()` re-materialises;
  `ws.path`.  A plain directory can also serve as a workspace (`Sandbox(path, ...)`).
* Execution: `sb = Sandbox(workspace_dir, config: SandboxConfig, protected_paths=[grader_dir])`
  - `sb.call_tool("pkg.module:function", {"arg": 1}, stage="S3") -> ExecutionRecord` runs a trusted
    tool function inside the sandbox through `python -m bat.sandbox.toolhost` (JSON on stdin, one JSON
    object on stdout).  Tool convention: `def function(workspace: pathlib.Path, **arguments)` returning
    something JSON-serialisable (a short str is best); `workspace` is the workspace as seen inside the
    sandbox (also the cwd).  An exception becomes `record.error` ("TypeError: ..."), never a raise.
  - `sb.execute_code("python" | "bash", code, stage="S3") -> ExecutionRecord` runs untrusted code.
* `ExecutionRecord` (pydantic, `schema_version`): tool, args, stage, runtime, exit_status, signal,
  duration_s, ok, result, error, stdout/stderr (head+tail truncated to `max_output_chars`),
  files_changed {added, modified, removed}, flags: `LimitFlags` {timeout, cpu, memory, nproc,
  file_size, output_too_large, access_outside, network, symlink_escape} with `.breach` (a security
  breach: access outside / network / symlink escape) and `.limited` (a resource limit was hit),
  evidence (short strings explaining each flag).
* Runtimes (`SandboxConfig.runtime`): `bwrap` (bubblewrap: new pid/net/ipc/uts namespaces, read-only
  /usr + python + venv + bat code, tmpfs /tmp, the workspace as the only writable bind at /workspace,
  grader paths simply absent; as root the call drops to `drop_uid`), `process` (subprocess + rlimits +
  process-group kill; fast but weaker: no filesystem or network isolation), `apptainer` (argv only).
  `get_runtime(name)` raises ValueError listing the valid names; `bwrap_available()`.

Containment is by isolation and rlimits, never by filtering the text of code.  Flags are recorded
from what the kernel reports (signals, exit codes), from a Python audit hook inside the tool host,
from error text (EROFS, ENETUNREACH), and from host-side checks (workspace symlinks leaving the
workspace are removed and flagged; protected paths are digested before/after).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "DigestMismatchError": "bat.sandbox.package",
    "PackageManifest": "bat.sandbox.package",
    "build_package": "bat.sandbox.package",
    "load_package": "bat.sandbox.package",
    "tree_digest": "bat.sandbox.package",
    "ExecutionRecord": "bat.sandbox.record",
    "FilesChanged": "bat.sandbox.record",
    "LimitFlags": "bat.sandbox.record",
    "RUNTIMES": "bat.sandbox.runtimes",
    "bwrap_available": "bat.sandbox.runtimes",
    "get_runtime": "bat.sandbox.runtimes",
    "Sandbox": "bat.sandbox.sandbox",
    "Workspace": "bat.sandbox.workspace",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Import public names on first use, so `python -m bat.sandbox.toolhost` stays light (stdlib only)."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'bat.sandbox' has no attribute {name!r}; public names: {__all__}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
