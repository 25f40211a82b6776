"""LLM teacher over a real local OpenAI-compatible HTTP server (scripted replies): same trajectory format."""

import json

import pytest
from fake_openai import ChatServer

from bat.bank.llm_client import ChatClient, TeacherEndpointError
from bat.bank.practice import instance_for, plan_tasks
from bat.bank.synthesize import bank_seed, synthesize
from bat.bank.teacher import run_scripted
from bat.config import load_config
from bat.config.bank import LlmTeacherConfig
from bat.state.layout import RunLayout


def _text(content):
    return {"choices": [{"message": {"role": "assistant", "content": content}}]}


def _structured(call):
    return {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": "Using the tool.",
                    "tool_calls": [
                        {
                            "type": "function",
                            "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])},
                        }
                    ],
                }
            }
        ]
    }


def test_llm_teacher_writes_the_same_trajectory_format(tmp_path, monkeypatch, one_task_bank):
    base = one_task_bank
    cfg = load_config(None, base)
    task = plan_tasks(cfg, bank_seed(cfg), ["classification"])[0]
    expert = run_scripted(instance_for(task, cfg), "expert", tmp_path / "expert", cfg)
    replies = [_text("I will look around first, no tool yet.")]
    replies += [_structured(t.call) if i == 1 else _text(t.response) for i, t in enumerate(expert.turns)]
    server = ChatServer(replies)
    monkeypatch.setenv("BAT_TEACHER_API_KEY", "test-key-123")
    try:
        llm_cfg = load_config(
            None, base + ["bank.teacher=llm", f"bank.llm.base_url={server.url}", "bank.llm.model=served"]
        )
        bank, _ = synthesize(llm_cfg, RunLayout(tmp_path / "run"))
    finally:
        server.close()
    traj = bank.trajectories()[0]
    assert traj.teacher == "llm:served" and traj.outcome == "success" and traj.checked
    assert traj.turns[0].call is None and traj.turns[0].observation.startswith("Error: invalid action")
    assert [t.call for t in traj.turns[1:]] == [t.call for t in expert.turns]
    assert traj.turns[2].response.startswith("Using the tool.\n<tool_call>")
    assert [r.stage for r in bank.rows()] == ["S1", "S2", "S3", "S4", "S5"]
    sft_turns = sorted(r.turn for r in bank.sft_rows("train") + bank.sft_rows("validation"))
    assert sft_turns == list(range(1, len(traj.turns)))
    path, body, auth = server.requests[0]
    assert path == "/v1/chat/completions" and body["model"] == "served" and auth == "Bearer test-key-123"
    assert [m["role"] for m in body["messages"]] == ["system", "user"] and body["tools"]
    assert [m["role"] for m in server.requests[2][1]["messages"]][-2:] == ["assistant", "tool"]


def test_endpoint_failures_raise_after_retries():
    server = ChatServer([b"not json", b"{}", _text("ok")])
    try:
        client = ChatClient(LlmTeacherConfig(base_url=server.url, retries=1, timeout_s=5))
        with pytest.raises(TeacherEndpointError, match="attempt 2"):
            client.complete([{"role": "user", "content": "hi"}])
        assert client.complete([{"role": "user", "content": "hi"}]) == "ok"
    finally:
        server.close()
