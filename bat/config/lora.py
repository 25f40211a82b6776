"""LoraConfig: train low-rank adapters (peft LoRA) on a frozen base instead of every weight (`sft.lora`, `grpo.lora`).

What is saved where with it on is said in `bat.train.lora` and docs/configuration.md.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from bat.config.base import Section

LLAMA_PROJECTIONS: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""The attention and MLP projections of a Llama-family decoder layer (SmolLM2, Llama, Qwen, Mistral)."""


class LoraConfig(Section):
    enabled: bool = False
    """Train LoRA adapters instead of the full model: the loaded weights are frozen, each target projection gets a
    trainable low-rank update B @ A (B starts at zero, so step 0 is the loaded model exactly), the optimizer holds
    only the adapters' state, and step checkpoints hold only the adapters and their optimizer state. The phase's
    export is still a full HF model (the adapters merged in), with the adapter itself under its `adapter/`
    folder."""
    r: int = Field(16, ge=1, le=4096)
    """Rank of each adapter (A is r x fan_in, B is fan_out x r)."""
    alpha: float = Field(32.0, gt=0.0)
    """LoRA alpha: the update is scaled by alpha / r."""
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    """Dropout on the adapters' input during training (0 keeps training deterministic, and a resumed run bitwise
    equal to an uninterrupted one)."""
    target_modules: tuple[str, ...] = Field(LLAMA_PROJECTIONS, min_length=1)
    """Names (the last dotted part) of the linear layers that get adapters; every name must occur in the model
    (an unknown name is refused, listing the linear layer names the model has). Default: the attention and MLP
    projections of Llama-family models."""

    @model_validator(mode="after")
    def _distinct_names(self) -> LoraConfig:
        repeated = sorted({name for name in self.target_modules if self.target_modules.count(name) > 1})
        blank = [name for name in self.target_modules if not name.strip()]
        if repeated or blank:
            raise ValueError(
                f"lora.target_modules must be distinct, non-empty layer names; got {list(self.target_modules)} "
                f"(repeated: {repeated}, blank: {len(blank)}); default: {list(LLAMA_PROJECTIONS)}"
            )
        return self
