"""DeepSpeedConfig: the engine settings shared by SFT and GRPO (nested in SftConfig and GrpoConfig)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from bat.config.base import Section

PRECISION_OF_DTYPE: dict[str, str] = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
"""The DeepSpeed precision that trains a policy loaded in each `model.dtype`: fp32 trains fp32 weights; bf16 and
fp16 train 16-bit weights with fp32 master weights and optimizer states (DeepSpeed's mixed precision)."""


class DeepSpeedConfig(Section):
    zero_stage: Literal[0, 1, 2, 3] = 0
    """ZeRO optimisation stage (0 = plain data parallel; 1/2/3 shard optimizer, grads, params)."""
    backend: Literal["auto", "gloo", "nccl"] = "auto"
    """torch.distributed backend; `auto` = nccl when CUDA is available, else gloo."""
    precision: Literal["fp32", "bf16", "fp16"] | None = None
    """Training precision. None (the default) = the one `model.dtype` implies (`PRECISION_OF_DTYPE`: float32 ->
    fp32, bfloat16 -> bf16, float16 -> fp16); set, it must be that same one (`training_precision`; a bf16 policy
    trained without DeepSpeed's fp32 master weights, or an fp32 load cast down, is refused). fp16 needs CUDA; on
    the CPU fp32 and bf16 run."""
    offload_optimizer: bool = False
    """ZeRO-Offload of optimizer states to CPU memory (stages 1-3 only)."""
    activation_checkpointing: bool = False
    """Activation checkpointing: keep only each decoder layer's input in the forward and recompute the layer in the
    backward (transformers' `activation_checkpointing_enable`, formerly `gradient_checkpointing_enable`;
    non-reentrant): the same loss and gradients for about one more forward of compute; activations ~2 x hidden
    bytes per token per layer instead of ~34 x hidden (`bat config plan`). It sits in the engine settings because
    both trainers build their engine from this section (`sft.deepspeed`, `grpo.deepspeed`)."""
    micro_batch_per_rank: int = Field(4, ge=1, le=4096)
    """Rows per rank per micro-step; global batch = micro * ranks * grad accumulation."""
    master_port: int = Field(29533, ge=1024, le=65535)
    """Rendezvous port when this process sets up a single-node group itself (no torchrun/srun env)."""


def training_precision(ds: DeepSpeedConfig, dtype: str, where: str = "deepspeed") -> str:
    """The DeepSpeed precision (`fp32`/`bf16`/`fp16`) that trains a policy loaded in `dtype` (`model.dtype`).
    Reads `ds.precision`; raises ValueError naming `where` (e.g. `sft.deepspeed`) and the valid values when it is
    set to another precision or `dtype` is unknown."""
    if dtype not in PRECISION_OF_DTYPE:
        raise ValueError(f"model.dtype {dtype!r} is not valid; valid: {list(PRECISION_OF_DTYPE)}")
    implied = PRECISION_OF_DTYPE[dtype]
    if ds.precision is not None and ds.precision != implied:
        raise ValueError(
            f"{where}.precision={ds.precision} does not match model.dtype={dtype}: training runs in model.dtype's "
            f"precision; valid: {where}.precision unset or {implied}, or set model.dtype to match "
            f"(pairs: {', '.join(f'{d}/{p}' for d, p in PRECISION_OF_DTYPE.items())})"
        )
    return implied
