"""ModelShape: the numbers of a decoder-only transformer that size its memory (`bat config plan`).

Field names follow HF `config.json` (Llama/Qwen style), so `ModelShape.from_hf_config` reads one directly.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from bat.config.base import Section


class ModelShape(Section):
    """Shape of the policy when its folder is not on this machine (`model.shape`), or of a registered model."""

    params: int | None = Field(None, ge=1)
    """Parameter count; None = computed from the fields below (`parameter_count`)."""
    num_hidden_layers: int = Field(ge=1, le=1024)
    """Decoder layers."""
    hidden_size: int = Field(ge=1, le=1_000_000)
    """Model width."""
    num_attention_heads: int = Field(ge=1, le=1024)
    """Query heads."""
    num_key_value_heads: int | None = Field(None, ge=1, le=1024)
    """Key/value heads (grouped-query attention); None = `num_attention_heads`."""
    head_dim: int | None = Field(None, ge=1, le=65536)
    """Width of one head; None = hidden_size / num_attention_heads."""
    intermediate_size: int = Field(ge=1, le=10_000_000)
    """MLP hidden size (gated MLP: gate, up and down projections)."""
    vocab_size: int = Field(ge=1, le=10_000_000)
    """Vocabulary size (embedding rows, logits width)."""
    tie_word_embeddings: bool = False
    """The LM head shares the input embedding's weights."""

    @model_validator(mode="after")
    def _heads_divide(self) -> ModelShape:
        if self.num_attention_heads % self.kv_heads:
            raise ValueError(
                f"num_attention_heads={self.num_attention_heads} must be a multiple of "
                f"num_key_value_heads={self.kv_heads}"
            )
        return self

    @property
    def kv_heads(self) -> int:
        """Key/value heads (grouped-query attention)."""
        return self.num_key_value_heads or self.num_attention_heads

    @property
    def head_width(self) -> int:
        """Width of one attention head."""
        return self.head_dim or self.hidden_size // self.num_attention_heads

    def parameter_count(self) -> int:
        """`params` when given, else computed: embedding V*h; per layer q h*a*d, k and v 2*h*kv*d, o a*d*h,
        gated MLP 3*h*I, two RMSNorms 2*h; final norm h; an untied LM head V*h. (Qwen3's per-head q/k norms,
        2*d per layer, are left out: < 0.01 % of any real model.) Exact for SmolLM2-135M (134,515,008)."""
        if self.params is not None:
            return self.params
        h, d, heads = self.hidden_size, self.head_width, self.num_attention_heads
        attention = h * heads * d + 2 * h * self.kv_heads * d + heads * d * h
        layer = attention + 3 * h * self.intermediate_size + 2 * h
        embeddings = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        return self.num_hidden_layers * layer + embeddings + h

    @classmethod
    def from_hf_config(cls, data: dict[str, Any]) -> ModelShape:
        """The shape in an HF `config.json` (a multimodal config's `text_config` when present); raises
        ValueError naming the missing keys."""
        text = data.get("text_config") if isinstance(data.get("text_config"), dict) else data
        wanted = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size", "vocab_size")
        missing = [key for key in wanted if not isinstance(text.get(key), int)]
        if missing:
            raise ValueError(f"config.json lacks integer {missing}; needed: {list(wanted)}")
        optional = ("num_key_value_heads", "head_dim")
        tie = text.get("tie_word_embeddings", data.get("tie_word_embeddings", False))
        return cls(
            **{key: text[key] for key in wanted},
            **{key: text[key] for key in optional if isinstance(text.get(key), int)},
            tie_word_embeddings=bool(tie),
        )
