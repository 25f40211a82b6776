"""`make_engine`: the rollout engine named by `rollout.engine` (hf, vllm in-process or server, sglang, openai) on a
checkpoint.

The engine interface and request/result types live in `bat.rollout.engine`; each engine in its own module.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bat.rollout.engine import ENGINES, Engine
from bat.rollout.engine_hf import HFEngine
from bat.rollout.engine_openai import OpenAIEngine
from bat.rollout.engine_sglang import SglangEngine
from bat.rollout.engine_vllm import VllmEngine, VllmServerEngine

if TYPE_CHECKING:
    from bat.config.rollout import RolloutConfig


def make_engine(cfg: RolloutConfig, model_path: str | Path) -> Engine:
    """Build the engine named by `cfg.engine` on the checkpoint at `model_path`."""
    if cfg.engine == "hf":
        return HFEngine(
            model_path,
            dtype=cfg.dtype,
            device=cfg.device,
            top_p=cfg.top_p,
            top_k=cfg.top_k,
            max_batch=cfg.max_batch,
            prefix_cache=cfg.hf_prefix_cache,
        )
    settings = dict(
        top_p=cfg.top_p,
        top_k=cfg.top_k,
        max_context_tokens=cfg.budgets.max_context_tokens,
        dtype=cfg.dtype,
        device=cfg.device,
    )
    if cfg.engine == "vllm" and cfg.vllm.process == "server":
        return VllmServerEngine(model_path, cfg.vllm, **settings)
    if cfg.engine == "vllm":
        return VllmEngine(model_path, cfg.vllm, **settings)
    if cfg.engine == "sglang":
        return SglangEngine(model_path, cfg.sglang, **settings)
    if cfg.engine == "openai":
        engine = OpenAIEngine(
            cfg.openai, top_p=cfg.top_p, top_k=cfg.top_k, checkpoint=str(model_path), dtype=cfg.dtype, device=cfg.device
        )
        if cfg.openai.verify_checkpoint:
            engine.verify(model_path)
        return engine
    raise ValueError(f"unknown rollout engine {cfg.engine!r}; valid engines: {list(ENGINES)}")
