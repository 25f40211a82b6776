"""The small engine interface the agent loop drives: token ids in, token ids + behavior logprobs out."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from bat.config.rollout import RolloutConfig

ENGINES = ("hf", "vllm", "openai")


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


def make_engine(cfg: RolloutConfig, model_path: str | Path) -> Engine:
    """Build the engine named by `cfg.engine` on the checkpoint at `model_path`."""
    if cfg.engine == "hf":
        from bat.rollout.engine_hf import HFEngine

        return HFEngine(
            model_path,
            dtype=cfg.dtype,
            device=cfg.device,
            top_p=cfg.top_p,
            top_k=cfg.top_k,
            max_batch=cfg.max_batch,
            prefix_cache=cfg.hf_prefix_cache,
        )
    if cfg.engine == "vllm" and cfg.vllm.process == "server":
        from bat.rollout.engine_vllm import VllmServerEngine

        return VllmServerEngine(
            model_path,
            cfg.vllm,
            top_p=cfg.top_p,
            top_k=cfg.top_k,
            max_context_tokens=cfg.budgets.max_context_tokens,
            dtype=cfg.dtype,
        )
    if cfg.engine == "vllm":
        from bat.rollout.engine_vllm import VllmEngine

        return VllmEngine(
            model_path,
            cfg.vllm,
            top_p=cfg.top_p,
            top_k=cfg.top_k,
            dtype=cfg.dtype,
            max_context_tokens=cfg.budgets.max_context_tokens,
        )
    if cfg.engine == "openai":
        from bat.rollout.engine_openai import OpenAIEngine

        engine = OpenAIEngine(
            cfg.openai, top_p=cfg.top_p, top_k=cfg.top_k, checkpoint=str(model_path), dtype=cfg.dtype, device=cfg.device
        )
        if cfg.openai.verify_checkpoint:
            engine.verify(model_path)
        return engine
    raise ValueError(f"unknown rollout engine {cfg.engine!r}; valid engines: {list(ENGINES)}")
