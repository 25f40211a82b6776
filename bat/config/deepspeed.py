"""DeepSpeedConfig: the engine settings shared by SFT and GRPO (nested in SftConfig and GrpoConfig)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from bat.config.base import Section


class DeepSpeedConfig(Section):
    zero_stage: Literal[0, 1, 2, 3] = 0
    """ZeRO optimisation stage (0 = plain data parallel; 1/2/3 shard optimizer, grads, params)."""
    backend: Literal["auto", "gloo", "nccl"] = "auto"
    """torch.distributed backend; `auto` = nccl when CUDA is available, else gloo."""
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"
    """Training precision; CPU runs use fp32."""
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
