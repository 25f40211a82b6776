"""The configured judge decides judgment items; a judge that is down makes S1 null, not 0.

The judge endpoint is a local test HTTP server speaking the OpenAI chat-completions shape (a fake judge)."""

import json

import pytest
from fake_openai import JudgeServer, verdicts_for

from bat.benchmark import run_episode
from bat.config.root import BatConfig


def _verdicts(value: bool):
    """Judge content giving `value` to every item id the request lists."""

    def reply(body: dict) -> str:
        return verdicts_for(json.loads(body["messages"][-1]["content"].rsplit("Item ids: ", 1)[1]), value)

    return reply


@pytest.fixture
def judge_url():
    with JudgeServer([_verdicts(False)]) as server:
        yield server.url


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
