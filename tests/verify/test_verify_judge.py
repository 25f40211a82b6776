"""LLM judge client against a real local HTTP server: strict replies, timeouts, retries, null verdicts."""

from __future__ import annotations

import json

import pytest
from fake_openai import JudgeServer, verdicts_for

from bat.benchmark.judge_client import JudgeClient, JudgeItem, JudgeReplyError, parse_reply
from bat.config.verify import JudgeConfig

ITEMS = [JudgeItem("s1a_plan_md", "a plan file exists"), JudgeItem("s1b_plan_pipeline", "plan names the pipeline")]
IDS = [i.id for i in ITEMS]


def client(url: str, **kw) -> JudgeClient:
    return JudgeClient(
        JudgeConfig(
            enabled=True,
            base_url=url,
            model="judge-x",
            timeout_s=kw.pop("timeout_s", 5.0),
            max_retries=kw.pop("max_retries", 1),
            **kw,
        )
    )


def test_good_reply_gives_verdicts_and_identity(monkeypatch):
    monkeypatch.setenv("BAT_JUDGE_API_KEY", "secret-token")
    reply = json.dumps({"verdicts": {"s1a_plan_md": True, "s1b_plan_pipeline": False}})
    with JudgeServer([reply]) as srv:
        jc = client(srv.url)
        res = jc.judge(ITEMS, "tool write_plan exit 0")
    assert res.verdicts == {"s1a_plan_md": True, "s1b_plan_pipeline": False}
    assert res.attempts == 1 and res.error is None
    assert jc.identity == f"judge-x@{srv.url}"
    req = srv.requests[0]
    assert req["path"] == "/v1/chat/completions" and req["auth"] == "Bearer secret-token"
    assert req["body"]["model"] == "judge-x" and "s1b_plan_pipeline" in req["body"]["messages"][1]["content"]


@pytest.mark.parametrize(
    "bad", ["sleep", "garbage", "http500", "wrong_ids", "extra_ids", "missing_id", "non_bool", "fenced", "bare_map"]
)
def test_failures_become_null_verdicts_after_bounded_retries(bad):
    reply = {
        "garbage": "The plan looks fine to me!",
        "wrong_ids": verdicts_for(["s9z_other", "s1b_plan_pipeline"]),
        "extra_ids": verdicts_for(IDS + ["s2a_checkpoint_downloaded"]),
        "missing_id": verdicts_for(IDS[:1]),
        "non_bool": json.dumps({"verdicts": {"s1a_plan_md": "yes", "s1b_plan_pipeline": 1}}),
        "fenced": "```json\n" + verdicts_for(IDS) + "\n```",
        "bare_map": verdicts_for(IDS)[len('{"verdicts": ') : -1],
    }.get(bad, bad)
    with JudgeServer([reply]) as srv:
        res = client(srv.url, timeout_s=0.5, max_retries=2).judge(ITEMS, "ctx")
    assert res.verdicts == {"s1a_plan_md": None, "s1b_plan_pipeline": None}
    assert res.attempts == 3 and len(srv.requests) == 3 and len(res.errors) == 3
    assert res.error


def test_retry_recovers_after_one_garbage_reply():
    with JudgeServer(["nonsense", verdicts_for(IDS, False)]) as srv:
        res = client(srv.url, max_retries=1).judge(ITEMS, "ctx")
    assert res.verdicts == dict.fromkeys(IDS, False) and res.attempts == 2


def test_unreachable_endpoint_is_null_not_exception():
    res = client("http://127.0.0.1:9/v1", timeout_s=0.5, max_retries=0).judge(ITEMS, "ctx")
    assert set(res.verdicts.values()) == {None} and "127.0.0.1:9" in res.error


def test_parse_reply_names_the_problem():
    with pytest.raises(JudgeReplyError, match=r"missing \['s1b_plan_pipeline'\].*valid ids"):
        parse_reply(verdicts_for(IDS[:1]), IDS)
    assert parse_reply(" " + verdicts_for(IDS) + "\n", IDS) == dict.fromkeys(IDS, True)
