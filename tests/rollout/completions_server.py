"""Stand-in for `vllm serve` / SGLang (named as such): a real local HTTP server answering /v1/completions in
vLLM's reply format (`return_tokens_as_token_ids`) and /generate in SGLang's native format, generating with
the real tiny model through the `hf` engine."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from bat.rollout.engine import GenRequest


class CompletionsServer:
    def __init__(self, engine, *, ids_as_text: bool = False) -> None:
        self.engine, self.requests, self.flushes = engine, [], 0
        lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                if self.path == "/reset_prefix_cache":
                    server.flushes += 1
                    self.send_response(200)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                if self.path == "/generate":  # SGLang native API
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
                with lock:
                    res = server.engine.generate([req])[0]
                if self.path == "/generate":
                    payload = json.dumps(
                        {
                            "text": "",
                            "meta_info": {
                                "finish_reason": {"type": res.finish},
                                "output_token_logprobs": [[lp, t, None] for lp, t in zip(res.logprobs, res.token_ids)],
                            },
                        }
                    ).encode()
                else:
                    tokens = [f"token_id:{t}" for t in res.token_ids] if not ids_as_text else ["x"] * len(res.token_ids)
                    choice = {
                        "index": 0,
                        "text": "",
                        "finish_reason": res.finish,
                        "logprobs": {"tokens": tokens, "token_logprobs": res.logprobs},
                    }
                    payload = json.dumps({"object": "text_completion", "choices": [choice]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
