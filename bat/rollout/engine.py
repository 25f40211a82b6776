"""The small engine interface the agent loop drives: token ids in, token ids + behavior logprobs out."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

ENGINES = ("hf", "vllm", "sglang", "openai")


@dataclass(frozen=True)
class GenRequest:
    """One continuation to sample: the full context as token ids and its own seed and limits."""

    prompt_ids: list[int]
    max_new_tokens: int
    seed: int
    temperature: float = 0.7
    stop_ids: tuple[int, ...] = ()
    cache_key: str | None = None
    """Engines with a prefix cache reuse the KV of this key's previous context when the prompt extends it."""


@dataclass
class GenResult:
    """Sampled token ids (stop token included when produced) and log pi_behavior of each of them."""

    token_ids: list[int]
    logprobs: list[float]
    finish: Literal["stop", "length"]
    error: str | None = None
    """Set when the engine failed for infrastructure reasons (the rollout becomes invalid)."""


class Engine(Protocol):
    """What every engine provides. `checkpoint` names the weights currently loaded."""

    name: str
    checkpoint: str

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        """Sample one continuation per request (batched where the engine can); same order as input."""
        ...

    def set_weights(self, path: str | Path) -> None:
        """Load new weights from `path` and flush every prefix/KV cache built on the old ones."""
        ...

    def close(self) -> None:
        """Release the model / connections."""
        ...

    def release(self, cache_key: str) -> None:
        """Forget the cached prefix of a finished rollout (no-op for engines without one)."""
        ...
