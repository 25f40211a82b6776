"""Stand-in for `python -m sglang.launch_server` (SGLang cannot be installed here; named as a mock in docs/mocks.md).

Run as the `sglang` engine's launcher script (`rollout.sglang.launcher: tests/fake_sglang.py`), it takes SGLang's
launch flags, loads the checkpoint at `--model-path` with bat's `hf` engine (the real weights, on the CPU, in
`--dtype`) and answers SGLang's native API on 127.0.0.1:`--port`: `GET /health`, `GET /get_model_info`
(`model_path`), `POST /generate` (`input_ids`, `sampling_params`, `return_logprob` -> `meta_info` with
`output_token_logprobs` `[logprob, id, None]` triples and `finish_reason`, through `CompletionsServer`),
`POST /update_weights_from_disk` (`{"model_path"}` -> `{"success", "message"}`) and `POST /flush_cache`.
It writes the argv it got to `$FAKE_SGLANG_ARGV` when set.

Stand-in-only flag: `--fake-weights PATH` loads PATH while `/get_model_info` keeps reporting `--model-path` (a
server on other weights than it claims: only the probe can tell).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading

from fake_openai import CompletionsServer, Reply, Request

from bat.rollout.engine_hf import HFEngine


class FakeSglang(CompletionsServer):
    """SGLang's native administration routes on top of the `/generate` stand-in."""

    def __init__(self, model_path: str, weights: str, dtype: str, port: int) -> None:
        self.model_path = model_path
        self.dtype = dtype
        super().__init__(HFEngine(weights, dtype=dtype), port=port)

    def _respond(self, request: Request) -> Reply:
        if request.path == "/health":
            return 200, b""
        if request.path == "/get_model_info":
            return 200, {"model_path": self.model_path, "tokenizer_path": self.model_path, "is_generation": True}
        if request.path == "/flush_cache":
            self.flushes += 1
            return 200, b""
        if request.path == "/update_weights_from_disk":
            path = request.body["model_path"]
            try:
                with self.lock:
                    self.engine.set_weights(path)
            except (OSError, ValueError) as exc:
                return 400, {"success": False, "message": f"cannot load {path}: {exc}"}
            self.model_path = path
            return 200, {"success": True, "message": "Succeeded to update model weights."}
        return super()._respond(request)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--fake-weights", default=None)
    args, _ = parser.parse_known_args(argv)  # --tp, --dp, --mem-fraction-static, ...: meaningless on one CPU
    if os.environ.get("FAKE_SGLANG_ARGV"):
        with open(os.environ["FAKE_SGLANG_ARGV"], "w", encoding="utf-8") as out:
            json.dump(argv, out)
    server = FakeSglang(args.model_path, args.fake_weights or args.model_path, args.dtype, args.port)
    server.start()
    threading.Event().wait()  # serve until the process group is killed


if __name__ == "__main__":
    main(sys.argv[1:])
