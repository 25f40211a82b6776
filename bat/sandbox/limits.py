"""Per-call resource limits and the `prlimit` argv prefix that applies them to the sandboxed command."""

from __future__ import annotations

import math
import shutil
from dataclasses import dataclass

from bat.config.sandbox import SandboxConfig


@dataclass(frozen=True)
class Limits:
    """Resolved limits of one call (derived from SandboxConfig; overridable per call)."""

    timeout_s: float
    cpu_s: int
    memory_mb: int
    nproc: int
    max_file_mb: int
    max_workspace_mb: int
    nofile: int
    max_output_chars: int
    max_output_bytes: int

    @classmethod
    def from_config(cls, config: SandboxConfig, **overrides: float | int) -> Limits:
        """Limits from config; `overrides` replace single fields (unknown names raise ValueError)."""
        valid = set(cls.__dataclass_fields__)
        unknown = sorted(set(overrides) - valid)
        if unknown:
            raise ValueError(f"unknown limit(s) {unknown}; valid: {sorted(valid)}")
        values = {name: getattr(config, name) for name in valid if name != "cpu_s"}
        values["cpu_s"] = config.cpu_s
        values.update(overrides)
        if not values["cpu_s"]:
            values["cpu_s"] = math.ceil(float(values["timeout_s"])) + 1
        return cls(**values)  # type: ignore[arg-type]


def prlimit_argv(limits: Limits, prlimit: str = "prlimit") -> list[str]:
    """`prlimit --as=.. --cpu=soft:hard --nproc=.. --fsize=.. --nofile=.. --core=0 --` (util-linux)."""
    mib = 1024 * 1024
    return [
        prlimit,
        f"--as={limits.memory_mb * mib}",
        f"--cpu={limits.cpu_s}:{limits.cpu_s + 1}",
        f"--nproc={limits.nproc}",
        f"--fsize={limits.max_file_mb * mib}",
        f"--nofile={limits.nofile}",
        "--core=0",
        "--",
    ]


def find_prlimit() -> str:
    """Absolute path of util-linux `prlimit`; RuntimeError says how to install it."""
    found = shutil.which("prlimit")
    if not found:
        raise RuntimeError(
            "`prlimit` (util-linux) not found on PATH; install util-linux (Debian: apt-get install util-linux)"
        )
    return found
