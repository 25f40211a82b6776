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


def measure_cpu_gflops(dtype: str, seconds: float = 1.5) -> tuple[float, str]:
    """This host's single-core matmul GFLOP/s in `dtype` (a 2048 x 4096 by 4096 x 4096 product, repeated for
    `seconds`), and where it was measured (`bat config plan --measure-cpu`)."""
    import time

    import torch

    torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        a, b = torch.randn(2048, 4096, dtype=torch_dtype), torch.randn(4096, 4096, dtype=torch_dtype)
        a @ b
        start, count = time.perf_counter(), 0
        while time.perf_counter() - start < seconds:
            a @ b
            count += 1
        rate = 2 * 2048 * 4096 * 4096 * count / (time.perf_counter() - start) / 1e9
    finally:
        torch.set_num_threads(threads)
    facts = cpu_facts()
    return rate, f"measured on this host: one core of {facts['model']} ({isa_kind(facts)}), {dtype}"
