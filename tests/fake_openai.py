"""The one stand-in for OpenAI-compatible endpoints in the tests (named as such in the README): a real local HTTP
server on 127.0.0.1 whose answers a `respond(request)` function decides. Its users below:

* `JudgeServer`: /v1/chat/completions with scripted judge replies (and failure modes);
* `ChatServer`: /v1/chat/completions replying with given payloads in order (the LLM teacher);
* `CompletionsServer`: `vllm serve` (/v1/completions, token ids) and SGLang (/generate), generating with a real
  engine, plus /reset_prefix_cache;
* `tests/fake_sglang.py`: the stand-in for `python -m sglang.launch_server` that the `sglang` engine starts.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple

from bat.rollout.engine import GenRequest


class Request(NamedTuple):
    """One POST the server received."""

    path: str
    body: Any
    auth: str | None


Reply = tuple[int, "bytes | dict[str, Any]"]
"""HTTP status and the payload (a dict is sent as JSON)."""


class FakeOpenAIServer:
    """Serves POSTs (and GETs, with body None) with `respond(request) -> (status, payload)` on `port` (0 = a free
    local port); records every request."""

    def __init__(self, respond: Callable[[Request], Reply], port: int = 0) -> None:
        self.received: list[Request] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output quiet
                pass

            def do_GET(self) -> None:
                self._answer(None)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw
                self._answer(body)

            def _answer(self, body: Any) -> None:
                request = Request(self.path, body, self.headers.get("Authorization"))
                server.received.append(request)
                status, payload = respond(request)
                data = json.dumps(payload).encode() if isinstance(payload, dict) else payload
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def requests(self) -> list[Any]:
        return self.received

    def start(self) -> FakeOpenAIServer:
        self.thread.start()
        return self

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def chat_reply(content: str, model: str | None = None) -> dict[str, Any]:
    """An OpenAI chat.completion payload whose assistant message is `content`."""
    return {
        "id": "x",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
    }


class JudgeServer(FakeOpenAIServer):
    """Serves `replies` in order (the last one repeats); each reply is judge content, a callable(body) -> content,
    or a failure mode: `sleep` (1.5 s, then garbage) or `http500`. `requests` are dicts (path, body, auth)."""

    def __init__(self, replies: list[str | Callable[[dict], str]]) -> None:
        self.replies = list(replies)
        super().__init__(self._respond)

    def _respond(self, request: Request) -> Reply:
        reply = self.replies[min(len(self.received) - 1, len(self.replies) - 1)]
        if reply == "sleep":
            time.sleep(1.5)
            reply = "garbage"
        if reply == "http500":
            return 500, b"internal error"
        content = reply(request.body) if callable(reply) else reply
        return 200, chat_reply(content, request.body.get("model"))

    @property
    def requests(self) -> list[dict[str, Any]]:
        return [r._asdict() for r in self.received]


def verdicts_for(ids, value=True) -> str:
    """Judge content giving `value` to every item id."""
    return json.dumps({"verdicts": dict.fromkeys(ids, value)})


class ChatServer(FakeOpenAIServer):
    """Answers with `replies` in order (dict payloads as JSON, bytes as they are), then an error payload; started
    at once. `requests` are `Request` tuples (path, body, auth)."""

    def __init__(self, replies: list[bytes | dict[str, Any]]) -> None:
        self.replies = list(replies)
        super().__init__(lambda request: (200, self.replies.pop(0) if self.replies else {"error": "no more replies"}))
        self.start()


class CompletionsServer(FakeOpenAIServer):
    """Stand-in for `vllm serve` (/v1/completions in vLLM's reply format with `return_tokens_as_token_ids`) and for
    SGLang (/generate), generating with `engine` (a real one, e.g. the `hf` engine on the tiny model). `requests` are
    the request bodies; `flushes` counts /reset_prefix_cache calls."""

    def __init__(self, engine, *, ids_as_text: bool = False, port: int = 0) -> None:
        self.engine, self.ids_as_text, self.flushes = engine, ids_as_text, 0
        self.lock = threading.Lock()
        super().__init__(self._respond, port)

    @property
    def requests(self) -> list[Any]:
        return [r.body for r in self.received if r.path != "/reset_prefix_cache"]

    def _respond(self, request: Request) -> Reply:
        body = request.body
        if request.path == "/reset_prefix_cache":
            self.flushes += 1
            return 200, b""
        if request.path == "/generate":  # SGLang native API
            sp = body["sampling_params"]
            req = GenRequest(
                prompt_ids=body["input_ids"],
                max_new_tokens=sp["max_new_tokens"],
                seed=sp["sampling_seed"],
                temperature=sp["temperature"],
                stop_ids=tuple(sp.get("stop_token_ids", ())),
            )
        else:
            req = GenRequest(
                prompt_ids=body["prompt"],
                max_new_tokens=body["max_tokens"],
                seed=body["seed"],
                temperature=body["temperature"],
                stop_ids=tuple(body.get("stop_token_ids", ())),
            )
        with self.lock:
            res = self.engine.generate([req])[0]
        if request.path == "/generate":
            logprobs = [[lp, t, None] for lp, t in zip(res.logprobs, res.token_ids)]
            return 200, {
                "text": "",
                "meta_info": {"finish_reason": {"type": res.finish}, "output_token_logprobs": logprobs},
            }
        tokens = [f"token_id:{t}" for t in res.token_ids] if not self.ids_as_text else ["x"] * len(res.token_ids)
        choice = {
            "index": 0,
            "text": "",
            "finish_reason": res.finish,
            "logprobs": {"tokens": tokens, "token_logprobs": res.logprobs},
        }
        return 200, {"object": "text_completion", "choices": [choice]}
