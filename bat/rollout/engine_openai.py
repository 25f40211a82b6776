"""`openai` engine: a client for a served policy (`vllm serve` /v1/completions, or SGLang's native /generate).

Token in, token out: the prompt is sent as a list of token ids; the reply must carry the sampled ids,
either as vLLM's `return_tokens_as_token_ids` strings (`"token_id:123"`) in `logprobs.tokens`, a
`token_ids` list on the choice, or SGLang's `meta_info.output_token_logprobs` `[logprob, id, text]`
triples. A server that returns only text is refused with a clear error, since re-tokenizing text would
break the alignment of ids, masks and behavior logprobs.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

from bat.config.rollout import OpenAIEngineConfig
from bat.httpjson import HttpError, post_empty, post_json
from bat.rollout.engine import GenRequest, GenResult

_PREFIX = "token_id:"


def parse_choice(choice: dict[str, Any]) -> GenResult:
    """Ids, logprobs and finish of one completion choice; raises ValueError when ids are not returned."""
    lp = choice.get("logprobs") or {}
    tokens, logps = lp.get("tokens"), lp.get("token_logprobs")
    if tokens is not None and all(isinstance(t, str) and t.startswith(_PREFIX) for t in tokens):
        ids = [int(t[len(_PREFIX) :]) for t in tokens]
    elif isinstance(choice.get("token_ids"), list):
        ids = [int(t) for t in choice["token_ids"]]
    else:
        raise ValueError(
            "server reply carries no token ids; start vLLM with token ids enabled "
            "(request field return_tokens_as_token_ids) or use the `hf`/`vllm` engine"
        )
    if logps is None or len(logps) != len(ids):
        raise ValueError(
            f"server returned {len(ids)} token ids but {'no' if logps is None else len(logps)} token logprobs"
        )
    finish: Literal["stop", "length"] = "stop" if choice.get("finish_reason") == "stop" else "length"
    return GenResult(token_ids=ids, logprobs=[float(x) if x is not None else 0.0 for x in logps], finish=finish)


def parse_sglang(reply: dict[str, Any]) -> GenResult:
    """Ids, logprobs and finish of an SGLang /generate reply (`meta_info.output_token_logprobs`)."""
    meta = reply.get("meta_info") or {}
    triples = meta.get("output_token_logprobs")
    if not isinstance(triples, list):
        raise ValueError("SGLang reply has no meta_info.output_token_logprobs; send return_logprob=true")
    ids = [int(t[1]) for t in triples]
    logps = [float(t[0]) if t[0] is not None else 0.0 for t in triples]
    kind = (meta.get("finish_reason") or {}).get("type")
    finish: Literal["stop", "length"] = "stop" if kind == "stop" else "length"
    return GenResult(token_ids=ids, logprobs=logps, finish=finish)


def _server_root(base_url: str) -> str:
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


class OpenAIEngine:
    """Client engine; `set_weights` asks nothing of the server (reload it there) but records the checkpoint."""

    name = "openai"
    concurrent = True
    """Thread-safe (one HTTP request per call); the server batches concurrent requests."""

    def __init__(
        self,
        cfg: OpenAIEngineConfig,
        *,
        top_p: float = 1.0,
        top_k: int = 0,
        checkpoint: str = "",
        dtype: str = "float32",
        device: str = "cpu",
    ) -> None:
        self.cfg, self.top_p, self.top_k = cfg, top_p, top_k
        self.dtype, self.device = dtype, device
        """Where the checkpoint is loaded to score the probe (`verify`)."""
        self.url = (
            _server_root(cfg.base_url) + "/generate"
            if cfg.api == "sglang"
            else cfg.base_url.rstrip("/") + "/completions"
        )
        self.checkpoint = checkpoint or cfg.model

    def body(self, req: GenRequest) -> dict[str, Any]:
        """The request for one GenRequest (vLLM completions with its id extensions, or SGLang /generate).

        `ignore_eos`: the server stops only at the request's stop ids or its token limit, as the hf engine does."""
        if self.cfg.api == "sglang":
            params: dict[str, Any] = {
                "max_new_tokens": req.max_new_tokens,
                "temperature": req.temperature,
                "top_p": self.top_p,
                "stop_token_ids": list(req.stop_ids),
                "skip_special_tokens": False,
                "sampling_seed": req.seed,
                "ignore_eos": True,
            }
            if self.top_k > 0:
                params["top_k"] = self.top_k
            return {"input_ids": list(req.prompt_ids), "sampling_params": params, "return_logprob": True}
        body: dict[str, Any] = {
            "model": self.cfg.model,
            "prompt": list(req.prompt_ids),
            "max_tokens": req.max_new_tokens,
            "temperature": req.temperature,
            "top_p": self.top_p,
            "seed": req.seed,
            "logprobs": 0,
            "return_tokens_as_token_ids": True,
            "stop_token_ids": list(req.stop_ids),
            "skip_special_tokens": False,
            "include_stop_str_in_output": True,
            "ignore_eos": True,
        }
        if self.top_k > 0:
            body["top_k"] = self.top_k
        return body

    def _one(self, req: GenRequest) -> GenResult:
        last = ""
        for _ in range(self.cfg.max_retries + 1):
            try:
                reply = post_json(
                    self.url, self.body(req), timeout_s=self.cfg.timeout_s, api_key_env=self.cfg.api_key_env
                )
                return parse_sglang(reply) if self.cfg.api == "sglang" else parse_choice(reply["choices"][0])
            except HttpError as exc:
                last = str(exc)
            except (KeyError, IndexError, TypeError, ValueError) as exc:
                return GenResult(token_ids=[], logprobs=[], finish="length", error=f"bad server reply: {exc}")
        return GenResult(token_ids=[], logprobs=[], finish="length", error=last)

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        """One HTTP request per GenRequest, `concurrency` in flight (the server batches them)."""
        if len(requests) <= 1:
            return [self._one(req) for req in requests]
        with ThreadPoolExecutor(max_workers=self.cfg.concurrency) as pool:
            return list(pool.map(self._one, requests))

    def set_weights(self, path: str | Path) -> None:
        """Move to the checkpoint at `path` (the server's owner reloads the server on it): flush the server's prefix
        cache through `flush_cache_url` when configured (a failed flush raises HttpError), then, with
        `verify_checkpoint`, check the server against `path` (`verify`)."""
        if self.cfg.flush_cache_url:
            post_empty(self.cfg.flush_cache_url, timeout_s=self.cfg.timeout_s, api_key_env=self.cfg.api_key_env)
        if self.cfg.verify_checkpoint:
            self.verify(path)
        self.checkpoint = str(path)

    def verify(self, path: str | Path) -> float:
        """Score the probe continuation from the server against the checkpoint at `path` (`bat.rollout.probe`);
        raises ServedModelMismatch naming both, or ModelFolderError when `path` is no model folder."""
        from bat.rollout.probe import check_served, default_tolerance

        return check_served(
            self,
            path,
            where=f"the server at {self.cfg.base_url}",
            dtype=self.dtype,
            device=self.device,
            tolerance=self.cfg.probe_tolerance or default_tolerance(self.dtype),
        )

    def release(self, cache_key: str) -> None:
        """The server manages its own cache."""

    def close(self) -> None:
        pass
