"""SftConfig: cold-start supervised fine-tuning on Stage Bank SFT rows (Eq. 10)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from bat.config.base import Section
from bat.config.deepspeed import DeepSpeedConfig
from bat.config.lora import LoraConfig


class SftConfig(Section):
    steps: int = Field(200, ge=1, le=10_000_000)
    """Optimizer steps (paper: 200)."""
    lr: float = Field(2e-5, gt=0.0, le=1.0)
    """Peak learning rate of the cosine schedule (paper: 2e-5 for 9B; tiny models need ~1e-3)."""
    min_lr_ratio: float = Field(0.0, ge=0.0, le=1.0)
    """Final learning rate as a fraction of `lr` at the end of the cosine."""
    warmup_ratio: float = Field(0.03, ge=0.0, lt=1.0)
    """Fraction of steps with linear warmup (paper: 3%)."""
    weight_decay: float = Field(0.0, ge=0.0, le=1.0)
    """AdamW weight decay (paper: 0)."""
    grad_clip: float = Field(1.0, gt=0.0)
    """Global gradient-norm clip (paper: 1)."""
    global_batch: int = Field(64, ge=1, le=1_000_000)
    """Sequences per optimizer step over all ranks (paper: 64 rows); must be a multiple of micro * ranks.
    Without packing a sequence is one row; with `pack_prefixes` a sequence carries one or more rows."""
    max_seq_len: int = Field(8192, ge=16, le=1_000_000)
    """Rows longer than this are rejected before training (counted, never clipped)."""
    pack_prefixes: bool = True
    """Merge rows whose tokens are an exact prefix of a longer row of the same trajectory into that row's
    sequence (one forward pass, several target spans; per-token losses and the token-mean loss unchanged)."""
    rename_identifiers: bool = True
    """Give every visit of a sequence fresh random practice identifiers (model, package, case and instance names,
    data-file prefix), so the policy learns to copy names from its context instead of memorising the practice
    vocabulary (held-out names come from a disjoint one). Validation is scored on renamed sequences too."""
    render_tools: bool = True
    """Render the benchmark's tool list (`bat.benchmark.TOOL_SPECS`) into each row's system turn, as rollouts do."""
    tool_format: Literal["json", "compact"] = "json"
    """How the tool list is rendered (SFT rows, rollouts and evaluation alike: `bat.policy.tools.policy_tools`).
    `json`: each tool's full JSON schema; `compact`: one short
    JSON object per tool, name, what it does and its parameters as `name: type = default` (852 -> 352 SmolLM2
    tokens).
    Calls are written and parsed the same way in both; only the prompt differs."""
    val_sequences: int | None = Field(None, ge=1)
    """Validation sequences scored per validation pass (the first N after packing, the same every pass);
    None = all. A 135M policy on CPU scores ~500 tokens/s, so a full pass over a bank's validation split costs
    minutes."""
    val_every: int = Field(50, ge=1)
    """Validation loss every this many steps (and at the end)."""
    checkpoint_every: int = Field(50, ge=1)
    """Save a resumable step checkpoint every this many steps."""
    keep_checkpoints: int = Field(3, ge=1)
    """Keep the newest K step checkpoints."""
    log_every: int = Field(1, ge=1)
    """Write a metrics line every this many steps."""
    target_logits_only: bool = True
    """Project hidden states to vocabulary logits only at trained positions (same loss and gradients; the
    `[B, T, V]` logits of every context token are what dominates memory on long contexts). False computes
    them everywhere (the reference `bat bench train --logits` compares against)."""
    deepspeed: DeepSpeedConfig = DeepSpeedConfig()
    """Engine settings."""
    lora: LoraConfig = LoraConfig()
    """LoRA adapters instead of full-parameter training (off by default; `bat.config.lora`)."""
