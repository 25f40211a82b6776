from __future__ import annotations

import pytest

from bat.policy.codec import INVALID_REASONS, InvalidAction, ToolCall, parse_tool_call, render_tool_call


def test_render_then_parse_round_trips():
    call = ToolCall(name="write_file", arguments={"path": "plan.md", "content": "a\n\"b\" ü", "n": [1, 2]})
    text = render_tool_call(call, thought="I will write the plan.")
    assert text.startswith("I will write the plan.\n<tool_call>{")
    parsed = parse_tool_call(text)
    assert isinstance(parsed, ToolCall)
    assert parsed.as_dict() == call.as_dict()
    assert parsed.thought == "I will write the plan."


def test_render_accepts_plain_dict_and_no_thought():
    assert render_tool_call({"name": "ls", "arguments": {}}) == '<tool_call>{"name": "ls", "arguments": {}}</tool_call>'


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("I am done.", "no_tool_call"),
        ('<tool_call>{"name": "ls", "arguments": {}}', "unclosed_tool_call"),
        ("<tool_call>{name: ls}</tool_call>", "bad_json"),
        ("<tool_call>[1, 2]</tool_call>", "not_an_object"),
        ('<tool_call>{"arguments": {}}</tool_call>', "missing_name"),
        ('<tool_call>{"name": "ls", "arguments": [1]}</tool_call>', "bad_arguments"),
        ('<tool_call>{"name": "ls", "arguments": {}, "x": 1}</tool_call>', "bad_arguments"),
        ('<tool_call>{"name": "a"}</tool_call><tool_call>{"name": "b"}</tool_call>', "multiple_tool_calls"),
    ],
)
def test_invalid_responses_name_their_reason(text, reason):
    parsed = parse_tool_call(text)
    assert isinstance(parsed, InvalidAction)
    assert parsed.reason == reason
    assert parsed.raw == text
    record = parsed.as_dict()
    assert record["invalid"] is True and record["reason"] == reason


def test_unknown_tool_lists_valid_tools():
    parsed = parse_tool_call('<tool_call>{"name": "rm", "arguments": {}}</tool_call>', tool_names=["ls", "cat"])
    assert isinstance(parsed, InvalidAction) and parsed.reason == "unknown_tool"
    assert "['cat', 'ls']" in parsed.detail


def test_string_arguments_are_decoded():
    parsed = parse_tool_call('<tool_call>{"name": "ls", "arguments": "{\\"path\\": \\".\\"}"}</tool_call>')
    assert isinstance(parsed, ToolCall) and parsed.arguments == {"path": "."}


def test_every_reason_is_documented():
    assert set(INVALID_REASONS) == {
        "no_tool_call", "unclosed_tool_call", "bad_json", "not_an_object", "missing_name", "bad_arguments",
        "multiple_tool_calls", "unknown_tool",
    }


def test_render_rejects_nameless_call():
    with pytest.raises(ValueError, match="string 'name'"):
        render_tool_call({"arguments": {}})
