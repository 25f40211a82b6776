"""Workspaces from state packages, and tool/code execution inside an isolation runtime.

Public API (import from `bat.sandbox`):

* State packages (the `p` of a Stage Bank row):
  `build_package(src_dir, dest_dir, metadata: dict) -> PackageManifest` copies a directory of plain
  files into `dest_dir/files/` and writes `dest_dir/package.json` (file list, sha256 digest, metadata);
  `load_package(dest_dir) -> PackageManifest`; `tree_digest(dir) -> str`.
* Workspaces: `Workspace.materialise(package_dir, workspace_dir) -> Workspace` makes a fresh copy and
  checks it against the package digest (`DigestMismatchError` otherwise); `ws.reset()` re-materialises;
  `ws.verify()`; `ws.path`.  A plain directory can also serve as a workspace (`Sandbox(path, ...)`).
* Execution: `sb = Sandbox(workspace_dir, config: SandboxConfig, protected_paths=[grader_dir])`
  (protected paths must lie outside the workspace and the code/python trees, else ValueError)
  - `sb.call_tool("pkg.module:function", {"arg": 1}, stage=key, **limit_overrides) -> ExecutionRecord`
    (`key`: the stage the benchmark attributes the call to) runs a trusted tool function inside the sandbox through `python -m bat.sandbox.toolhost` (JSON
    request on stdin, one JSON reply on stdout).  Tool convention: `def function(workspace: Path,
    **arguments)` returning something JSON-serialisable (a short str is best); `workspace` is the
    workspace as seen inside the sandbox (`/workspace` under bwrap).  The tool's own prints go to the
    record's stderr.  An exception becomes `record.error` ("TypeError: ...") and `record.error_type`.
  - `sb.execute_code("python" | "bash", code, stage=key, **limit_overrides) -> ExecutionRecord` runs
    untrusted code with the workspace as cwd.  `limit_overrides`: any `Limits` field (timeout_s,
    memory_mb, nproc, max_file_mb, ...); unknown names raise ValueError listing the valid ones.
  Nothing the sandboxed code does raises; only caller mistakes (unknown language, bad workspace) do,
  and `SandboxBootError` (RuntimeError) when the runtime itself fails to start - infrastructure, so
  callers mark the rollout/run null instead of scoring it (a shim announces boot inside the sandbox).
* `ExecutionRecord` (pydantic, `schema_version`): kind (tool|code), tool, args, stage, runtime,
  exit_status, signal, duration_s, ok, result, error, error_type, stdout/stderr (head+tail kept within
  `max_output_chars`) + *_truncated, files_changed {added, modified, removed}, flags: `LimitFlags`
  {timeout, cpu, memory, nproc, file_size, output_too_large, access_outside, network, symlink_escape}
  with `.breach` (security: access_outside / network / symlink_escape -> zeroes a benchmark run) and
  `.limited` (a resource limit was hit), evidence (short lines explaining flags and host clean-ups).
* Runtimes (`SandboxConfig.runtime`): `bwrap` (bubblewrap: new pid/net/ipc/uts namespaces, read-only
  /usr + python + venv + the `bat` package, tmpfs /tmp, the workspace as the only writable bind at
  /workspace, grader paths simply absent; as root calls drop to `drop_uid`, as a normal user a user
  namespace is used), `process` (prlimit + own session + process-group kill; fast but weaker: NO
  filesystem or network isolation, and root ignores RLIMIT_NPROC), `apptainer` (argv built and
  tested; needs `apptainer_image`, not runnable on CPU dev machines).
  `get_runtime(name, config)` raises ValueError listing the valid names; `bwrap_available()`.
* Warm mode (`SandboxConfig.warm`, `preload`): the Sandbox keeps one sandboxed tool server per workspace
  (`python -m bat.sandbox.toolserver`, same runtime argv/mounts/uid) and forks each call from it with
  per-call rlimits, deadline, output cap; every other process in the namespace is killed and /tmp
  emptied after each call.  Same records, ~10-20x faster tool calls.  Call `sb.close()` (or use
  `with Sandbox(...) as sb:`) to stop the server; it is restarted after `Workspace.reset()` or if a
  call kills it (that call is recorded as killed, not as infrastructure).  One thread per Sandbox.
* `bat.sandbox.tools`: generic tools `list_files`, `read_file`, `write_file`.
  `bat.sandbox.selftest.run_selftest(config)`: every known escape (ESCAPES) against a runtime.
* CLI: `bat sandbox selftest [--runtime bwrap] [--only NAME..] [--json]`,
  `bat sandbox exec --workspace DIR (--tool T --args JSON | --python CODE | --bash CODE)`;
  benchmark: `bat bench sandbox` (per-call overhead process vs bwrap, expert episode per track).

Containment is by isolation and rlimits, never by filtering the text of code.  Flags are recorded
from what the kernel reports (signals, exit codes), from a Python audit hook inside the tool host,
from error text on stderr (EROFS, ENETUNREACH, EAGAIN on fork), and from host-side checks after each
call: symlinks leaving the workspace are removed and flagged, FIFOs/sockets/devices are removed,
protected paths are fingerprinted before/after, and the workspace size is checked.  Under bwrap no
process survives a call (the pid namespace dies with it).
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
    "SandboxBootError": "bat.sandbox.sandbox",
    "Limits": "bat.sandbox.limits",
    "Workspace": "bat.sandbox.workspace",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Import public names on first use, so `python -m bat.sandbox.toolhost` stays light (stdlib only)."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'bat.sandbox' has no attribute {name!r}; public names: {__all__}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
