"""The configured judge decides judgment items; a judge that is down makes S1 null, not 0.

The judge endpoint is a local test HTTP server speaking the OpenAI chat-completions shape (a fake judge)."""

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from bat.benchmark import run_episode
from bat.config.root import BatConfig


class _FakeJudge(BaseHTTPRequestHandler):
    verdict = False

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        ids = json.loads(body["messages"][-1]["content"].rsplit("Item ids: ", 1)[1])
        reply = {"choices": [{"message": {"content": json.dumps({"verdicts": dict.fromkeys(ids, self.verdict)})}}]}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def judge_url():
    server = HTTPServer(("127.0.0.1", 0), _FakeJudge)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def _cfg(url: str) -> BatConfig:
    return BatConfig.model_validate(
        {
            "benchmark": {"runtime": "inprocess"},
            "verify": {"judge": {"enabled": True, "base_url": url, "max_retries": 0, "timeout_s": 5}},
        }
    )


def test_configured_judge_decides_judgment_items(judge_url, tmp_path):
    ep = run_episode("classification", "expert", seed=1, workdir=tmp_path, config=_cfg(judge_url))
    assert ep.score.items["S1"]["s1b_plan_pipeline"] is False and ep.score.items["S1"]["s1a_plan_md"] is True
    assert ep.score.stages["S1"] == 0.5 and ep.score.judge.startswith("judge@")


def test_unreachable_judge_gives_null_stage(tmp_path):
    ep = run_episode("vqa", "expert", seed=1, workdir=tmp_path, config=_cfg("http://127.0.0.1:9/v1"))
    assert ep.score.stages["S1"] is None and ep.score.overall is None and not ep.score.valid
    assert ep.score.stages["S3"] == 1.0 and ep.score.task == 1.0
