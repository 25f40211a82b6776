"""A fingerprint of this CPU's float arithmetic in the ops an SFT step uses, to check in seconds whether two machines
(or two settings of the math libraries) would train bit-identical checkpoints.

`python -m bat.perf.numerics` prints the ATen CPU capability, the MKL/oneDNN pins in the environment and a digest of
a fixed computation on seeded inputs: matmuls (MKL), a linear layer, RMS norm, SiLU, softmax, cross entropy, their
backward pass and one AdamW step. Two machines with the same digest under the same settings (and thread count) compute
these ops identically; a different digest means a rebuilt checkpoint will differ in its last bits. The pin that
`orchestrate.resources.sft.env` can set (`MKL_CBWR=AVX2,STRICT`, `ATEN_CPU_CAPABILITY=avx2`,
`ONEDNN_MAX_CPU_ISA=AVX2`) must be in the environment before Python starts, as in a phase job.

Reads nothing; writes nothing.
"""

from __future__ import annotations

import hashlib
import os

from bat.train.kernels import KERNEL_ENV_PREFIXES, kernel_environment, warm_optimizer_kernels

__all__ = ["KERNEL_ENV_PREFIXES", "PIN_NAMES", "fingerprint", "kernel_environment"]

PIN_NAMES = ("MKL_CBWR", "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "OMP_NUM_THREADS")
"""Environment variables that select the math kernels (and so the rounding) of the CPU ops."""


def fingerprint(seed: int = 0) -> str:
    """sha256 (first 16 hex) of the outputs, gradients and updated weights of a small seeded forward/backward pass,
    after the training engine's warm-up step (`warm_optimizer_kernels`), as in a training phase."""
    import torch

    warm_optimizer_kernels()
    gen = torch.Generator().manual_seed(seed)
    hidden, vocab, tokens = 576, 1024, 96
    embed = torch.nn.Parameter(torch.randn(vocab, hidden, generator=gen) * 0.02)
    up = torch.nn.Parameter(torch.randn(4 * hidden, hidden, generator=gen) * 0.02)
    down = torch.nn.Parameter(torch.randn(hidden, 4 * hidden, generator=gen) * 0.02)
    ids = torch.randint(0, vocab, (tokens,), generator=gen)
    labels = torch.randint(0, vocab, (tokens,), generator=gen)
    x = embed[ids]
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)
    x = x + torch.nn.functional.silu(x @ up.T) @ down.T
    logits = x @ embed.T
    attention = torch.softmax(logits[:, :tokens] / hidden**0.5, dim=-1) @ x
    loss = torch.nn.functional.cross_entropy(logits, labels) + attention.square().mean()
    loss.backward()
    params = [embed, up, down]
    torch.optim.AdamW(params, lr=1e-4, weight_decay=0.0).step()
    digest = hashlib.sha256()
    for tensor in (loss.detach(), logits.detach(), *(p.grad for p in params), *(p.detach() for p in params)):
        digest.update(tensor.contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def main() -> int:
    import torch

    pins = " ".join(f"{name}={os.environ[name]}" for name in PIN_NAMES if name in os.environ) or "no pins"
    print(f"capability {torch.backends.cpu.get_cpu_capability()}, threads {torch.get_num_threads()}, {pins}")
    print(f"fingerprint {fingerprint()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
