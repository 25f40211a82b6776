"""`sglang` engine: an SGLang server bat starts on the checkpoint, spoken to through SGLang's native API.

`SglangEngine` starts `python -m sglang.launch_server` on the phase's checkpoint (`bat.rollout.sglang_server`,
settings from `rollout.sglang`), sends every request to `POST /generate` with `input_ids`, `sampling_params` and
`return_logprob: true`, and reads the sampled ids and their behavior log-probs from `meta_info.output_token_logprobs`
(the `openai` engine's client with `api: sglang`): SGLang's OpenAI-compatible completions API has no token-id fields.
The server batches whatever is in flight (the loop runs each rollout on its own thread). `set_weights` reloads the
running server from disk (`/update_weights_from_disk`), or starts a new one when the context budget changes or the
server refuses the reload; either way the probe checks the served weights against the new checkpoint before a
request is made. `close` stops the server's process group.
"""

from __future__ import annotations

from pathlib import Path

from bat.rollout.engine_server import ManagedServerEngine
from bat.rollout.sglang_server import SglangServer, SglangServerError


class SglangEngine(ManagedServerEngine):
    """SGLang's server on the checkpoint, started, reloaded and stopped by bat; requests may come from many threads."""

    name = "sglang"
    api = "sglang"

    def start_server(self, path: Path) -> SglangServer:
        """SGLang's server on `path` with the policy's dtype and the capped context, running."""
        return SglangServer(path, self.cfg, context_length=self.max_context, dtype=self.dtype).start()

    @property
    def concurrency(self) -> int:
        """`max_running_requests` per copy, times the data-parallel copies."""
        return self.cfg.max_running_requests * self.cfg.data_parallel_size

    def set_weights(self, path: str | Path) -> None:
        """Move to the checkpoint at `path`: reload the running server in place when the context budget is unchanged
        (a refused reload starts a new server), else start a new one; then flush its cache and probe it."""
        from bat.policy.loader import check_model_dir

        path = check_model_dir(path)
        server = self.server
        if server is None or self._cap_context(path) != server.context_length:
            super().set_weights(path)
            return
        try:
            server.reload(path)
        except SglangServerError:
            super().set_weights(path)
            return
        server.reset_prefix_cache()
        self.connect(path)
