"""SandboxConfig: which isolation runtime runs tool calls and agent code, and the limits of one call."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from bat.config.base import Section


class SandboxConfig(Section):
    """Isolation runtime and per-call limits (see `bat/sandbox/__init__.py`)."""

    runtime: Literal["bwrap", "process", "apptainer"] = "bwrap"
    """`bwrap`: bubblewrap (no network, read-only system, only the workspace writable; the default);
    `process`: plain subprocess + rlimits + process-group kill (fast, weaker: no filesystem or network
    isolation); `apptainer`: argv is built and unit-tested but not runnable on CPU-only dev machines."""
    timeout_s: float = Field(10.0, gt=0.0, le=3600.0)
    """Wall-clock limit of one call; on expiry the whole process tree is killed."""
    cpu_s: int = Field(0, ge=0, le=3600)
    """RLIMIT_CPU seconds of one call; 0 = ceil(timeout_s) + 1."""
    memory_mb: int = Field(2048, ge=64, le=1_048_576)
    """RLIMIT_AS (virtual address space) of every process of a call, MiB."""
    nproc: int = Field(64, ge=4, le=100_000)
    """RLIMIT_NPROC: processes/threads of the sandbox user (shared by concurrent calls when bat runs as root)."""
    max_file_mb: int = Field(64, ge=1, le=1_048_576)
    """RLIMIT_FSIZE: largest file a call may write, MiB."""
    max_workspace_mb: int = Field(2048, ge=1, le=1_048_576)
    """Workspace size above which a call is flagged `file_size` (checked after the call; not a quota)."""
    nofile: int = Field(256, ge=16, le=65_536)
    """RLIMIT_NOFILE: open file descriptors per process."""
    max_output_chars: int = Field(8192, ge=256, le=10_000_000)
    """stdout/stderr/result characters kept in the execution record (head and tail kept, middle elided)."""
    max_output_bytes: int = Field(8_388_608, ge=4096, le=1_073_741_824)
    """stdout+stderr bytes after which the call is killed and flagged `output_too_large`."""
    drop_uid: int = Field(65534, ge=1, le=4_294_967_294)
    """When bat runs as root, bwrap calls run as this uid/gid (root is exempt from RLIMIT_NPROC)."""
    code_paths: tuple[str, ...] = ()
    """Extra directories mounted read-only and put on PYTHONPATH inside bwrap (the `bat` package is always)."""
    apptainer_image: str = ""
    """Image (.sif) the `apptainer` runtime runs calls in; required when runtime is `apptainer`."""
    warm: bool = False
    """Keep one sandboxed tool server per workspace that forks each call from a pre-imported interpreter
    (same isolation, far faster tool calls; per-call limits cannot exceed the config values)."""
    preload: tuple[str, ...] = ()
    """Modules the warm server imports once (e.g. `bat.benchmark.tools.infer`); ignored when cold."""
    python: str = ""
    """Python interpreter for the tool host and `execute_code`; empty = the interpreter running bat."""
