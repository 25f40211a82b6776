"""What selects a training process's CPU math kernels (and so the last bits of its checkpoints): recorded by the
training phases beside their outputs (`bat.perf.numerics` fingerprints the arithmetic itself).

Reads the environment and torch's CPU capability; writes nothing.
"""

from __future__ import annotations

import os

KERNEL_ENV_PREFIXES = ("MKL_", "OMP_", "KMP_", "GOMP_", "ATEN_", "ONEDNN_", "DNNL_", "LD_PRELOAD")
"""Prefixes of the environment variables that can select the math kernels (and so the rounding) of a process."""


def kernel_environment() -> dict[str, str | int]:
    """What selects this process's CPU kernels: every `KERNEL_ENV_PREFIXES` variable, the ATen capability and the
    intra-op thread count. A training phase records it beside its outputs."""
    import torch

    seen: dict[str, str | int] = {k: v for k, v in sorted(os.environ.items()) if k.startswith(KERNEL_ENV_PREFIXES)}
    return seen | {"capability": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads()}
