"""What selects a training process's CPU math kernels (and so the last bits of its checkpoints): recorded by the
training phases beside their outputs (`bat.perf.numerics` fingerprints the arithmetic itself).

Reads the environment and torch's CPU capability; writes nothing.

`warm_optimizer_kernels` runs one throwaway AdamW step before a process's first real one. Measured on an AMD EPYC
(Zen 4) under `MKL_CBWR=AVX2,STRICT ATEN_CPU_CAPABILITY=avx2 OMP_NUM_THREADS=2`: in about 1 fresh process in 10,
the first AdamW step computes the second thread's half of a 590k-element tensor differently (1 ulp on 0.4 % of its
elements; gradients and moments identical; the second step of the same process never differs). After a warm-up
step on a throwaway tensor, 60 of 60 fresh processes computed the same weights (against 104 of 120 without).
"""

from __future__ import annotations

import os

KERNEL_ENV_PREFIXES = ("MKL_", "OMP_", "KMP_", "GOMP_", "ATEN_", "ONEDNN_", "DNNL_", "LD_PRELOAD")
"""Prefixes of the environment variables that can select the math kernels (and so the rounding) of a process."""


WARM_ELEMENTS = 1 << 20
"""Elements of the throwaway parameter: more than one intra-op thread's grain, so every thread runs the step."""


def warm_optimizer_kernels() -> None:
    """One AdamW step on a throwaway parameter of `WARM_ELEMENTS` elements, so the first real optimizer step of this
    process runs on kernels every intra-op thread has run before (see the module docstring). Reads and writes
    nothing; touches no random generator."""
    import torch

    weights = torch.nn.Parameter(torch.ones(WARM_ELEMENTS))
    weights.grad = torch.full_like(weights, 1e-3)
    torch.optim.AdamW([weights], lr=1e-4).step()


def kernel_environment() -> dict[str, str | int]:
    """What selects this process's CPU kernels: every `KERNEL_ENV_PREFIXES` variable, the ATen capability and the
    intra-op thread count. A training phase records it beside its outputs."""
    import torch

    seen: dict[str, str | int] = {k: v for k, v in sorted(os.environ.items()) if k.startswith(KERNEL_ENV_PREFIXES)}
    return seen | {"capability": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads()}
