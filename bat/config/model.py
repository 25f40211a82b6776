"""ModelConfig: which policy model to load (a named pretrained model, a local HF directory or the tiny builder)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from bat.config.base import Section
from bat.config.model_shape import ModelShape
from bat.config.pretrained import REGISTRY
from bat.state.model_files import folder_config, folder_positions, read_build_info


class CopyStage(Section):
    """One stage of copy pretraining."""

    kind: Literal["random", "text", "identifier"] = "random"
    """`random`: a span of random ids recurs among random ids; `text`: a span of random ids recurs 2-4 times
    inside a window of the tokenizer's practice corpus; `identifier`: the same with a tokenized random
    identifier (letters and digits, as renamed SFT rows and held-out names are spelled) as the span."""
    steps: int = Field(ge=1, le=1_000_000)
    """AdamW steps of this stage (its minimum when `until_loss` is set)."""
    until_loss: float | None = Field(None, gt=0.0)
    """If set, the stage goes on past `steps` until the mean copy loss over the last `log_every` steps is at
    most this (nats), up to `max_steps`. For a stage whose copy circuit forms at a step that varies with the
    seed (a phase change): the next stage only builds on a circuit that has formed. None = exactly `steps`."""
    max_steps: int | None = Field(None, ge=1, le=1_000_000)
    """Upper bound with `until_loss` (default 3 x `steps`); a stage that reaches it without the target prints a
    warning and the build goes on."""
    vocab: int = Field(0, ge=0)
    """Draw ids from the first `vocab` ordinary token ids (bytes first, then BPE merges by frequency); 0 = all."""
    seq_len: int = Field(64, ge=16, le=131072)
    """Ids per sequence."""
    batch: int | None = Field(None, ge=1, le=4096)
    """Sequences per step in this stage; None = `copy_pretrain.batch`."""

    @model_validator(mode="after")
    def _bounds(self) -> CopyStage:
        if self.max_steps is not None and self.until_loss is None:
            raise ValueError("max_steps is the bound of an until_loss stage; set until_loss or drop max_steps")
        if self.max_steps is not None and self.max_steps < self.steps:
            raise ValueError(f"max_steps ({self.max_steps}) must be at least steps ({self.steps})")
        return self

    @property
    def step_bound(self) -> int:
        """Most steps this stage can take."""
        if self.until_loss is None:
            return self.steps
        return self.max_steps if self.max_steps is not None else 3 * self.steps


class CopyPretrainConfig(Section):
    """Copy pretraining of the tiny base model (`bat.policy.copy_pretrain`): random-token sequences in which a
    span recurs, loss on the recurrence; gives the random-init model the ability to copy names from context.

    Measured on the small shape: the copy circuit forms only on a small vocabulary (about 500 steps on the first
    128 ids) and then carries over as the vocabulary grows stage by stage; trained on all 2048 ids from the
    start it had not formed after 600 steps."""

    stages: list[CopyStage] = Field(default_factory=list)
    """Stages in order; empty = none (the model stays random-init)."""
    batch: int = Field(32, ge=1, le=4096)
    """Sequences per step."""
    lr: float = Field(2e-3, gt=0.0, le=1.0)
    """Learning rate (linear warmup over the first `warmup_steps`, then constant)."""
    warmup_steps: int = Field(20, ge=0)
    """Warmup steps."""
    log_every: int = Field(50, ge=1)
    """Report the copy loss every this many steps."""

    @property
    def steps(self) -> int:
        """Planned (minimum) steps over all stages."""
        return sum(stage.steps for stage in self.stages)


class TinyModelConfig(Section):
    """Shape of the deterministic tiny model (byte-level BPE + random-init Qwen3)."""

    vocab_size: int = Field(2048, ge=300, le=65536)
    """BPE vocabulary size including the 256 byte symbols and the special tokens."""
    hidden_size: int = Field(256, ge=16, le=8192)
    """Model width; must be divisible by `num_heads`."""
    num_layers: int = Field(4, ge=1, le=128)
    """Decoder layers."""
    num_heads: int = Field(4, ge=1, le=128)
    """Attention heads."""
    num_kv_heads: int = Field(2, ge=1, le=128)
    """Key/value heads (grouped-query attention); must divide `num_heads`."""
    intermediate_size: int = Field(768, ge=16, le=65536)
    """MLP hidden size."""
    max_positions: int = Field(2048, ge=64, le=131072)
    """Maximum sequence length (rotary positions)."""
    tie_embeddings: bool = True
    """Share input embedding and LM head weights."""
    copy_pretrain: CopyPretrainConfig = CopyPretrainConfig()
    """Copy pretraining after random init (off by default; `configs/small.yaml` turns it on)."""

    @model_validator(mode="after")
    def _heads_divide(self) -> TinyModelConfig:
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size={self.hidden_size} must be divisible by num_heads={self.num_heads}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads={self.num_heads} must be divisible by num_kv_heads={self.num_kv_heads}")
        for stage in self.copy_pretrain.stages:
            if stage.seq_len > self.max_positions:
                raise ValueError(
                    f"copy_pretrain stage seq_len={stage.seq_len} exceeds max_positions={self.max_positions}"
                )
        return self


TINY_PRESETS: dict[str, TinyModelConfig] = {
    "tiny": TinyModelConfig(),
    "10m": TinyModelConfig(hidden_size=384, num_layers=6, num_heads=6, num_kv_heads=2, intermediate_size=1152),
}
"""Named shapes: `tiny` (~3.7 M parameters) and `10m` (~11 M parameters)."""


class ModelConfig(Section):
    """The base policy: exactly one of `pretrained` (a named model converted from an installed package),
    `path` (a local HF directory), or neither (the offline tiny model built under state/<run>/models/tiny)."""

    pretrained: str | None = None
    """Name of a registered pretrained model (`bat.policy.pretrained.REGISTRY`, e.g. `smollm2-135m-instruct`),
    converted once from its installed PyPI package into `cache_dir` and reused; never a hub id."""
    path: str | None = None
    """Local HF model directory (never a hub id); None with `pretrained` None = the tiny model."""
    cache_dir: str | None = None
    """Where named pretrained models are converted; None = $BAT_MODEL_CACHE, else $XDG_CACHE_HOME/bat/models,
    else ~/.cache/bat/models."""
    tiny: TinyModelConfig = TinyModelConfig()
    """Tiny-builder settings, used when neither `pretrained` nor `path` is set, or by `bat model build-tiny`."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """Weights dtype of the policy from load to export: SFT and GRPO load the policy in it and train in the matching
    DeepSpeed precision (bfloat16 -> bf16 with fp32 master weights and optimizer states;
    `bat.config.deepspeed.PRECISION_OF_DTYPE`), the HF exports are written in it, and GRPO's frozen KL reference
    (`grpo.kl_reference: checkpoint`) and the route's KL check load their copies in it (log-softmax in fp32).
    float16 trains only on CUDA; on the CPU float32 and bfloat16 run. The rollout engine's dtype is
    `rollout.dtype`."""
    shape: ModelShape | None = None
    """Shape of `path`'s model for `bat config plan` on a machine without its weights (a login node before the
    checkpoint is copied); the folder's own `config.json` wins whenever it gives a shape. Only with `path`: a named
    pretrained model and the tiny model have known shapes."""

    @model_validator(mode="after")
    def _one_source(self) -> ModelConfig:
        if self.pretrained is not None and self.path is not None:
            raise ValueError(f"set model.pretrained ({self.pretrained!r}) or model.path ({self.path!r}), not both")
        if self.shape is not None and self.path is None:
            raise ValueError(
                "model.shape describes the model at model.path when its folder is not on this machine; set "
                "model.path too, or drop model.shape (named pretrained models and the tiny model have known shapes)"
            )
        if self.pretrained is not None and self.pretrained not in REGISTRY:
            raise ValueError(
                f"model.pretrained {self.pretrained!r} is not a registered model; valid names: {sorted(REGISTRY)}"
            )
        return self

    def positions(self) -> int | None:
        """Context length the base policy was trained for: the registered value of `pretrained`, or
        `max_position_embeddings` of `path`'s config.json when readable; None for the tiny model (random-init
        rotary positions extend; `tiny.max_positions` is only its config value, also for a tiny model given as
        `path`) or an unreadable path."""
        if self.pretrained is not None:
            return REGISTRY[self.pretrained].positions
        if self.path is not None:
            folder = Path(self.path)

            try:
                if read_build_info(folder).get("builder") == "bat.policy.tiny":
                    return None
            except (OSError, ValueError, AttributeError):
                pass
            return folder_positions(folder)
        return None

    def planned_shape(self) -> tuple[ModelShape, str]:
        """The policy's shape for resource planning and where it came from: `path`'s `config.json` when it gives one,
        else `shape`; the registered shape of `pretrained`; else the tiny builder's. Reads only config.json.
        Raises ValueError when `path` gives no shape and `shape` is not set."""
        if self.path is not None:
            data, why = folder_config(self.path), "is not on this machine"
            if data is not None:
                try:
                    return ModelShape.from_hf_config(data), f"config.json at model.path {self.path}"
                except ValueError as exc:
                    why = f"has a config.json without a usable shape ({exc})"
            if self.shape is None:
                raise ValueError(
                    f"model.path {self.path} {why} and model.shape is not set; set model.shape "
                    f"({', '.join(ModelShape.model_fields)}) to plan without the weights"
                )
            return self.shape, f"model.shape (model.path {self.path} {why})"
        if self.pretrained is not None:
            return REGISTRY[self.pretrained].shape, f"the registered shape of model.pretrained {self.pretrained}"
        tiny = self.tiny
        shape = ModelShape(
            num_hidden_layers=tiny.num_layers,
            hidden_size=tiny.hidden_size,
            num_attention_heads=tiny.num_heads,
            num_key_value_heads=tiny.num_kv_heads,
            intermediate_size=tiny.intermediate_size,
            vocab_size=tiny.vocab_size,
            tie_word_embeddings=tiny.tie_embeddings,
        )
        return shape, "model.tiny (the tiny builder)"
