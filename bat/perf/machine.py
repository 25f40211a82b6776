"""The CPU a figure was measured on: model name, the vector-ISA flags that change kernel speed and rounding, cores.

Reads `/proc/cpuinfo` (Linux) and `os.sched_getaffinity`. Writes nothing.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

ISA_PREFIXES = ("avx", "amx", "fma", "f16c", "sse4")
"""Flags kept in the record: the families that decide which matmul kernels run (speed and last-bit rounding)."""


def cpu_facts(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, Any]:
    """`{"model": str, "flags": [sorted ISA flags], "cores": usable cores, "machine": arch}` of this host."""
    model, flags = platform.processor() or "unknown", set()
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and value.strip():
            model = value.strip()
        elif key in ("flags", "Features") and not flags:
            flags = {f for f in value.split() if f.startswith(ISA_PREFIXES)}
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 0
    return {"model": model, "flags": sorted(flags), "cores": cores, "machine": platform.machine()}


def isa_kind(facts: dict[str, Any]) -> str:
    """A short name of the CPU kind: `amx`, `avx512` or `avx2` (or `other`), the axis on which fp32 results differ."""
    flags = set(facts.get("flags", []))
    if any(f.startswith("amx") for f in flags):
        return "amx"
    if "avx512f" in flags:
        return "avx512"
    return "avx2" if "avx2" in flags else "other"
