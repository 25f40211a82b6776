"""The execution record of one sandboxed call (tool or code): what ran, how it ended, what it touched."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

BREACH_FLAGS = ("access_outside", "network", "symlink_escape")
LIMIT_FLAGS = ("timeout", "cpu", "memory", "nproc", "file_size", "output_too_large")


class LimitFlags(BaseModel):
    """Which limits were hit and which escape attempts were observed during one call."""

    model_config = ConfigDict(extra="forbid")

    timeout: bool = False
    """Wall-clock limit reached; the whole process tree was killed."""
    cpu: bool = False
    """RLIMIT_CPU reached (SIGXCPU/SIGKILL from the kernel)."""
    memory: bool = False
    """Address-space limit reached (MemoryError / failed allocation)."""
    nproc: bool = False
    """Process limit reached (fork/clone refused)."""
    file_size: bool = False
    """RLIMIT_FSIZE reached (SIGXFSZ / EFBIG)."""
    output_too_large: bool = False
    """stdout+stderr exceeded `max_output_bytes`; the call was killed."""
    access_outside: bool = False
    """Attempted to read a protected path or write outside the workspace."""
    network: bool = False
    """Attempted to open a network connection."""
    symlink_escape: bool = False
    """Left a symlink in the workspace pointing outside it (removed after the call)."""

    @property
    def breach(self) -> bool:
        """A security breach attempt (zeroes a benchmark run), as opposed to a resource limit."""
        return any(getattr(self, name) for name in BREACH_FLAGS)

    @property
    def limited(self) -> bool:
        """Some resource limit was hit."""
        return any(getattr(self, name) for name in LIMIT_FLAGS)

    def raised(self) -> list[str]:
        """Names of the flags that are set, in declaration order."""
        return [name for name in (*LIMIT_FLAGS, *BREACH_FLAGS) if getattr(self, name)]


class FilesChanged(BaseModel):
    """Workspace paths (relative, POSIX) added, modified and removed by a call."""

    model_config = ConfigDict(extra="forbid")

    added: list[str] = Field(default_factory=list)
    modified: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)

    @property
    def any(self) -> bool:
        return bool(self.added or self.modified or self.removed)


class ExecutionRecord(BaseModel):
    """One tool call or code execution inside the sandbox (JSON-serialisable, versioned)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    kind: Literal["tool", "code"]
    """`tool`: a trusted function by dotted name; `code`: untrusted python/bash."""
    tool: str
    """`pkg.module:function` for tools; `execute_code` for code."""
    args: dict[str, Any] = Field(default_factory=dict)
    """Tool arguments as given (for code: language and code)."""
    stage: str | None = None
    """Stage tag (e.g. `S3`) supplied by the caller."""
    runtime: str
    """Runtime that executed the call (`bwrap`, `process`, ...)."""
    exit_status: int | None = None
    """Process exit code; None when killed by a signal."""
    signal: int | None = None
    """Terminating signal number, if any."""
    duration_s: float = 0.0
    """Wall-clock seconds from spawn to reap."""
    ok: bool = False
    """The call finished normally: exit 0, no tool error, no limit or breach flag."""
    result: Any = None
    """Tool return value (None for code and on error), truncated to max_output_chars if text."""
    error: str | None = None
    """Short error text (`TypeError: ...`, `killed by signal 9`, ...)."""
    error_type: str | None = None
    """Exception class name raised by the tool or code (e.g. `FileNotFoundError`), when one was."""
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    files_changed: FilesChanged = Field(default_factory=FilesChanged)
    flags: LimitFlags = Field(default_factory=LimitFlags)
    evidence: list[str] = Field(default_factory=list)
    """Short lines saying what was observed for each raised flag, and what the host cleaned up."""

    @property
    def breach(self) -> bool:
        return self.flags.breach
