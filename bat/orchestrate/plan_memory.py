"""Memory formulas of the resource plan (`bat.orchestrate.plan`): training state under ZeRO, activations, logits,
KV cache. Pure arithmetic on a `ModelShape`; every constant names its source. Sizes are bytes.

Standard mixed-precision accounting (Rajbhandari et al. 2020, "ZeRO", Sec. 3.1): a 16-bit run keeps 2 B/param
weights, 2 B/param gradients and 12 B/param AdamW state (fp32 master copy, m, v); an fp32 run keeps 4 + 4 and 8
(m, v; the weights are the master). ZeRO-1 splits the optimizer state over the data-parallel ranks, ZeRO-2 also the
gradients, ZeRO-3 also the weights.
"""

from __future__ import annotations

from dataclasses import dataclass

from bat.config.model_shape import ModelShape

GIB = 2**30
"""Bytes in a GiB: Slurm's `--mem=NG` and every `*_gb` field of the config count in GiB."""

PRECISION_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "float32": 4, "bfloat16": 2, "float16": 2}
"""Bytes per element of a training precision (`deepspeed.precision`) or a weights dtype (`model.dtype`)."""

ACTIVATION_HIDDEN_MULTIPLE = 34
"""Activation bytes saved for the backward per token per layer, in units of the hidden size, in 16-bit: Korthikanti
et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models", Eq. 1: s*b*h*(34 + 5*a*s/h)) without
the attention-score term 5*a*s/h, which fused attention (PyTorch SDPA / FlashAttention, transformers' default) never
stores. A gated MLP of 3*h (Qwen, Llama) lands near the same figure. fp32 doubles it."""

CHECKPOINT_HIDDEN_MULTIPLE = 2
"""With activation checkpointing each decoder layer keeps only its input: hidden values, 2*h bytes per token in
16-bit (fp32 doubles it); the backward recomputes one layer at a time, whose full activations come on top."""

ADAM_STATE_BYTES = {"fp32": 8, "bf16": 12, "fp16": 12}
"""AdamW state per parameter: m and v in fp32, plus the fp32 master copy in 16-bit precision."""

ZERO_BUCKET_ELEMENTS = 500_000_000
"""DeepSpeed's default `reduce_bucket_size` and `allgather_bucket_size` (elements) for the config bat writes
(`bat.train.engine.ds_config` sets neither)."""

ZERO3_LIVE_PARAMETERS = 1_000_000_000
"""DeepSpeed's default `stage3_max_live_parameters`: gathered ZeRO-3 weights resident at once."""

CUDA_RUNTIME_BYTES = 1.5 * GIB
"""Per GPU process: CUDA context, cuBLAS workspaces and NCCL buffers (an approximation; ~0.5-2 GiB in practice)."""


@dataclass(frozen=True)
class Item:
    """One line of a memory budget."""

    label: str
    bytes: float
    detail: str = ""


def training_state(params: int, precision: str, zero_stage: int, ranks: int, offload: bool) -> tuple[list[Item], float]:
    """Per-rank device items (weights, gradients, optimizer state) and the host bytes per rank that
    `offload_optimizer` moves off the device (optimizer state + fp32 gradients, partitioned; ZeRO >= 1 only)."""
    width = PRECISION_BYTES[precision]
    optim = ADAM_STATE_BYTES[precision]

    def share(stage: int) -> int:
        return ranks if zero_stage >= stage else 1

    def part(stage: int) -> str:
        return f" / {ranks} ranks" if share(stage) > 1 else ""

    items = [
        Item("weights", params * width / share(3), f"{precision} {width} B/param{part(3)}"),
        Item("gradients", params * width / share(2), f"{precision} {width} B/param{part(2)}"),
    ]
    offloaded = offload and zero_stage >= 1
    host = (optim + 4) * params / share(1) if offloaded else 0.0
    if not offloaded:
        items.append(Item("optimizer", params * optim / share(1), f"AdamW {optim} B/param{part(1)}"))
    return items, host


def zero_buffers(params: int, precision: str, zero_stage: int, ranks: int) -> Item:
    """DeepSpeed's communication buffers at its default sizes: the all-reduce bucket of data parallelism (stage 0,
    more than one rank), reduce + all-gather buckets (stages 1-2), live gathered weights + reduce bucket (stage 3)."""
    width = PRECISION_BYTES[precision]
    bucket = min(ZERO_BUCKET_ELEMENTS, params)
    if zero_stage == 3:
        elements, detail = min(ZERO3_LIVE_PARAMETERS, params) + bucket, "ZeRO-3 live weights + reduce bucket"
    elif zero_stage >= 1:
        elements, detail = 2 * bucket, "reduce + all-gather buckets"
    else:
        elements, detail = (bucket if ranks > 1 else 0), "all-reduce bucket"
    return Item("ZeRO buffers", elements * width, detail)


def layer_activation_bytes(shape: ModelShape, tokens: int, precision: str) -> float:
    """Full activations of one decoder layer over `tokens` tokens (ACTIVATION_HIDDEN_MULTIPLE x hidden per token)."""
    return tokens * ACTIVATION_HIDDEN_MULTIPLE * shape.hidden_size * PRECISION_BYTES[precision] / 2


def activations(shape: ModelShape, tokens: int, precision: str, checkpointing: bool) -> Item:
    """Activations kept for the backward of one micro-batch of `tokens` tokens: every layer's full activations, or
    with checkpointing every layer's input plus one layer's full activations (the one being recomputed)."""
    width = PRECISION_BYTES[precision]
    full = shape.num_hidden_layers * layer_activation_bytes(shape, tokens, precision)
    kept = tokens * shape.num_hidden_layers * CHECKPOINT_HIDDEN_MULTIPLE * shape.hidden_size * width / 2
    kept += layer_activation_bytes(shape, tokens, precision)
    if checkpointing:
        return Item("activations", kept, f"{tokens} tokens, checkpointing on ({full / GIB:.1f} GiB without)")
    return Item("activations", full, f"{tokens} tokens, checkpointing off ({kept / GIB:.1f} GiB with)")


def logit_bytes_per_entry(precision: str) -> int:
    """Peak bytes per (position, vocabulary entry) of the loss head (`bat.train.losses.token_logprobs`): the logits
    in the training precision, their fp32 copy, the fp32 log-softmax kept for the backward and its fp32 gradient
    (16-bit: 2 + 4 + 4 + 4 = 14; fp32, where the copy is the tensor itself: 12)."""
    width = PRECISION_BYTES[precision]
    return width + (0 if width == 4 else 4) + 4 + 4


def logits(shape: ModelShape, positions: int, precision: str, detail: str) -> Item:
    """The `[positions, vocab]` logits of one micro-batch and what the loss derives from them."""
    return Item("logits", positions * shape.vocab_size * logit_bytes_per_entry(precision), detail)


def kv_bytes_per_token(shape: ModelShape, dtype: str) -> int:
    """KV cache per token: keys and values of every layer, 2 x layers x kv_heads x head_dim x bytes."""
    return 2 * shape.num_hidden_layers * shape.kv_heads * shape.head_width * PRECISION_BYTES[dtype]


def total(items: list[Item]) -> float:
    """Sum of a budget's items in bytes."""
    return sum(item.bytes for item in items)


def lora_parameters(shape: ModelShape, target_modules: tuple[str, ...], rank: int) -> tuple[int, list[str]]:
    """Adapter parameters of LoRA rank `rank` on the named projections of every layer (A: r x fan_in, B: fan_out x
    r), and the target names this Llama/Qwen-shaped count does not know (counted as none)."""
    h, d, inter = shape.hidden_size, shape.head_width, shape.intermediate_size
    q, kv = shape.num_attention_heads * d, shape.kv_heads * d
    fans = {
        "q_proj": (h, q),
        "k_proj": (h, kv),
        "v_proj": (h, kv),
        "o_proj": (q, h),
        "gate_proj": (h, inter),
        "up_proj": (h, inter),
        "down_proj": (inter, h),
    }
    per_layer = sum(rank * sum(fans[name]) for name in target_modules if name in fans)
    return shape.num_hidden_layers * per_layer, [name for name in target_modules if name not in fans]


def lora_training_state(
    params: int, adapters: int, precision: str, zero_stage: int, ranks: int, offload: bool
) -> tuple[list[Item], float]:
    """`training_state` with LoRA: the loaded weights frozen (no gradients, no optimizer state; split by ZeRO-3
    like any weight), the adapters trained with their own gradients and AdamW state."""
    frozen, _ = training_state(params, precision, zero_stage, ranks, offload)
    state, host = training_state(adapters, precision, zero_stage, ranks, offload)
    items = [Item("weights (frozen)", frozen[0].bytes, frozen[0].detail + ", no gradients or optimizer state")]
    items += [Item(f"LoRA {i.label}", i.bytes, f"{adapters:,} adapter parameters, {i.detail}") for i in state]
    return items, host
