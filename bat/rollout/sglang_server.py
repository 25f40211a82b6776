"""An SGLang server that bat starts on one checkpoint (`python -m sglang.launch_server`), reloads and stops.

Start-up, the health poll, the log and the process-group stop are `bat.rollout.server_process`'s; this module gives
the command line (`--model-path CKPT --tp N --dp N --port P --host 127.0.0.1 --mem-fraction-static F ...` from
`rollout.sglang`), the environment and SGLang's native administration calls: `GET /get_model_info` must report the
checkpoint the server was started on (or last reloaded), `POST /update_weights_from_disk` moves a running server to
another checkpoint of the same architecture, `POST /flush_cache` empties its prefix (radix) cache.

Behavior log-probs: SGLang's sampler reports the log-probs of the distribution it sampled from (after temperature,
top-p and top-k) unless `SGLANG_RETURN_ORIGINAL_LOGPROB` is set; the environment pins it off, so the recorded
log-probs match vLLM's `processed_logprobs` mode.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from bat.config.rollout import SglangEngineConfig
from bat.httpjson import HttpError, get_json, post_empty, post_json
from bat.rollout.server_process import ServerProcess, ServerStartError, importable_here, resolve_python


class SglangServerError(ServerStartError):
    """The SGLang server could not be started, did not come up, or serves something else than asked."""


def sglang_python(configured: str | None) -> str:
    """The interpreter that runs SGLang: `rollout.sglang.python`, else `$BAT_SGLANG_PYTHON`, else this one when it
    imports sglang; raises SglangServerError naming what to do."""
    return resolve_python(
        [("rollout.sglang.python", configured), ("$BAT_SGLANG_PYTHON", os.environ.get("BAT_SGLANG_PYTHON"))],
        here=sys.executable if importable_here("sglang") else None,
        local=None,
        missing="rollout.engine = 'sglang' needs SGLang (pip install 'sglang[all]' in the image or an environment of "
        "its own): set rollout.sglang.python or $BAT_SGLANG_PYTHON to a Python that has sglang; engines that need "
        "no SGLang: ['hf', 'vllm', 'openai']",
        error=SglangServerError,
    )


class SglangServer(ServerProcess):
    """One SGLang server process on `checkpoint`; `start()` waits until it serves, `reload()` moves it to another
    checkpoint, `stop()` ends it."""

    label = "SGLang"
    timeout_key = "rollout.sglang.start_timeout_s"
    error = SglangServerError

    def __init__(
        self, checkpoint: str | Path, cfg: SglangEngineConfig, *, context_length: int, dtype: str, seed: int = 0
    ) -> None:
        super().__init__(checkpoint, start_timeout_s=cfg.start_timeout_s, port=cfg.port)
        self.cfg, self.context_length, self.dtype, self.seed = cfg, int(context_length), dtype, seed
        self.python = sglang_python(cfg.python)

    @property
    def base_url(self) -> str:
        """The native API's root (`/generate`, `/get_model_info`, ...)."""
        return self.root_url

    def argv(self) -> list[str]:
        """The server command line: the launcher, then SGLang's launch flags, then `extra_args`."""
        launcher = self.cfg.launcher
        head = [self.python, launcher] if launcher.endswith(".py") else [self.python, "-m", launcher]
        flags = {
            "--model-path": self.checkpoint,
            "--tp": self.cfg.tensor_parallel_size,
            "--dp": self.cfg.data_parallel_size,
            "--host": "127.0.0.1",
            "--port": self.port,
            "--dtype": self.dtype,
            "--context-length": self.context_length,
            "--mem-fraction-static": self.cfg.mem_fraction_static,
            "--max-running-requests": self.cfg.max_running_requests,
            "--random-seed": self.seed,
            "--log-level": "warning",
        }
        return [*head, *(str(part) for item in flags.items() for part in item), *self.cfg.extra_args]

    def environment(self) -> dict[str, str]:
        """The common server environment; behavior log-probs after temperature (module docstring)."""
        env = super().environment()
        env["SGLANG_RETURN_ORIGINAL_LOGPROB"] = "false"
        return env

    def served_path(self) -> str:
        """The checkpoint the running server reports (`/get_model_info` `model_path`)."""
        return str(get_json(f"{self.root_url}/get_model_info", timeout_s=30).get("model_path") or "")

    def check_model(self) -> None:
        """Refuse a server whose `/get_model_info` is not the checkpoint."""
        served = self.served_path()
        if Path(served).resolve() != Path(self.checkpoint):
            raise SglangServerError(
                f"SGLang server at {self.root_url} serves {served}, not the checkpoint {self.checkpoint}"
            )

    def reload(self, checkpoint: str | Path) -> None:
        """Load the weights of `checkpoint` into the running server (`/update_weights_from_disk`, same architecture),
        then check `/get_model_info`; raises SglangServerError with the server's message when it refuses."""
        path = str(Path(checkpoint).resolve())
        try:
            reply = post_json(f"{self.root_url}/update_weights_from_disk", {"model_path": path}, timeout_s=1800)
        except HttpError as exc:
            raise SglangServerError(f"SGLang server at {self.root_url} could not load {path}: {exc}") from exc
        if not reply.get("success", False):
            raise SglangServerError(
                f"SGLang server at {self.root_url} could not load {path}: {reply.get('message', reply)}"
            )
        self.checkpoint = path
        self.check_model()

    def reset_prefix_cache(self) -> None:
        """Empty the server's radix cache (`POST /flush_cache`)."""
        post_empty(f"{self.root_url}/flush_cache", timeout_s=60)
