"""What the engines on a server bat manages share (`vllm` with `process: server`, `sglang`).

`EngineSettings` holds what an engine on a checkpoint folder is built from (the engine's config section, sampling
filters, the policy's dtype, the probe's device and the context budget capped to the checkpoint's positions).
`ManagedServerEngine` starts the engine's server on the checkpoint (`start_server`, a
`bat.rollout.server_process.ServerProcess`), talks to it through the HTTP client of the `openai` engine in the
server's own API (vLLM's completions with token ids, SGLang's native `/generate`), verifies the served weights
against the checkpoint with the probe (`bat.rollout.probe`) and stops the server's process group in `close`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Literal

from bat.config.rollout import OpenAIEngineConfig
from bat.rollout.engine import GenRequest, GenResult
from bat.rollout.engine_openai import OpenAIEngine
from bat.rollout.server_process import SERVED_NAME, ServerProcess


class EngineSettings:
    """What an engine on a checkpoint is built from: the engine's config section `cfg`, the sampling filters, the
    policy's dtype (served weights and the probe's local load), the probe's device (`rollout.device`) and the
    context budget (capped to the checkpoint's positions when a checkpoint is loaded: `max_context`)."""

    def __init__(
        self,
        cfg: Any,
        *,
        top_p: float = 1.0,
        top_k: int = 0,
        max_context_tokens: int = 8192,
        dtype: str = "float32",
        device: str = "cpu",
    ) -> None:
        self.cfg, self.top_p, self.top_k = cfg, top_p, top_k
        self.max_context_tokens, self.dtype, self.device = max_context_tokens, dtype, device
        self.checkpoint = ""
        self.max_context: int | None = None

    def _cap_context(self, path: Path) -> int:
        """Set and return `max_context`: the context budget, at most the positions the checkpoint at `path` has."""
        from bat.state.model_files import folder_positions

        positions = folder_positions(path)
        self.max_context = min(self.max_context_tokens, positions) if positions else self.max_context_tokens
        return self.max_context


class ManagedServerEngine(EngineSettings, ABC):
    """A server bat starts on the checkpoint and stops at the end; requests may come from many threads.

    Subclasses set `name` and `api` (the client's wire format) and define `start_server(path)` and `concurrency`."""

    name = "server"
    api: Literal["completions", "sglang"] = "completions"
    concurrent = True
    """Thread-safe and batching concurrent requests itself: the loop gives every rollout its own thread."""

    def __init__(self, model_path: str | Path, cfg: Any, **settings: Any) -> None:
        super().__init__(cfg, **settings)
        self.server: Any = None
        self.client: OpenAIEngine | None = None
        self.probe_diff: float | None = None
        """Largest probe log-prob difference between the server and the checkpoint at the last check."""
        self.set_weights(model_path)

    @abstractmethod
    def start_server(self, path: Path) -> ServerProcess:
        """Start this engine's server on the checkpoint at `path` (context `max_context`) and return it running."""

    @property
    @abstractmethod
    def concurrency(self) -> int:
        """Requests the client keeps in flight (what the server schedules at once, over all its copies)."""

    def set_weights(self, path: str | Path) -> None:
        """Stop the old server, then start one on `path`, connect and probe it (one server at a time: both would not
        fit a small machine); a failure raises the server's ServerStartError with its log's tail, or
        ServedModelMismatch from the probe (the server is stopped)."""
        from bat.policy.loader import check_model_dir

        path = check_model_dir(path)  # a missing or incomplete folder: ModelFolderError naming it
        self._cap_context(path)
        self.close()
        self.server = self.start_server(path)
        self.connect(path)

    def connect(self, path: Path) -> None:
        """Point the client at the running server and, with `verify_checkpoint`, probe it against `path`."""
        client_cfg = OpenAIEngineConfig(
            base_url=self.server.base_url,
            api=self.api,
            model=SERVED_NAME,
            api_key_env="",
            timeout_s=self.cfg.request_timeout_s,
            max_retries=0,
            concurrency=self.concurrency,
        )
        self.client = OpenAIEngine(client_cfg, top_p=self.top_p, top_k=self.top_k, checkpoint=str(path))
        if self.cfg.verify_checkpoint:
            from bat.rollout.probe import check_served, default_tolerance

            try:
                self.probe_diff = check_served(
                    self.client,
                    path,
                    where=f"{self.server.label} server {self.server.base_url}",
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
        """Send every request at once (up to `concurrency` in flight); the server batches them."""
        if self.client is None:
            raise RuntimeError(f"the {self.name} server engine is closed")
        return self.client.generate(requests)

    def reset_prefix_cache(self) -> None:
        """Empty the server's prefix cache (benchmarks: no measurement reuses another's prefill)."""
        if self.server is not None:
            self.server.reset_prefix_cache()

    def release(self, cache_key: str) -> None:
        """The server's automatic prefix cache needs no per-rollout bookkeeping."""

    def close(self) -> None:
        """Stop the server (its whole process group)."""
        if self.server is not None:
            self.server.stop()
        self.server, self.client = None, None
