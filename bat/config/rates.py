"""RatesConfig: the throughputs `bat config plan` turns each phase's work into time (`orchestrate.rates`).

They are stated figures, not measurements of your site: replace them with what your nodes do (`bat bench engine`
for generation, a short SFT run's tokens/s for training, `bat config plan --measure-cpu` for this host's CPU).
"""

from __future__ import annotations

from pydantic import Field

from bat.config.base import Section


class RatesConfig(Section):
    """Throughputs per GPU or CPU core that the time plan divides each phase's work by."""

    gpu_tflops: float = Field(312.0, gt=0.0, le=100_000.0)
    """Dense 16-bit peak of one GPU in TFLOP/s (A100 312, H100 SXM 989, L40S 362); fp32 phases get a quarter."""
    train_mfu: float = Field(0.35, gt=0.0, le=1.0)
    """Fraction of `gpu_tflops` a training step sustains (model FLOP utilisation; 0.3-0.5 for ZeRO-3 at 8 GPUs)."""
    serve_tokens_per_s: float = Field(1500.0, gt=0.0)
    """Tokens one GPU of the serving engine generates per second over all its concurrent sequences (a 7-9B model in
    bf16 under vLLM or SGLang on an 80 GB GPU); the plan scales it by the model's size relative to 9e9 parameters."""
    cpu_gflops: float = Field(25.0, gt=0.0)
    """Sustained matmul GFLOP/s of one CPU core in `model.dtype` (the route's KL check on the CPU)."""
    probe_prompt_tokens: int = Field(1500, ge=1)
    """Tokens of one KL probe prompt (system prompt, tool list and task), scored by both models."""
