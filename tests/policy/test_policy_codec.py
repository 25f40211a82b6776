from __future__ import annotations

import pytest

from bat.policy.codec import INVALID_REASONS, InvalidAction, ToolCall, parse_tool_call, render_tool_call


def test_render_then_parse_round_trips():
    call = ToolCall(name="write_file", arguments={"path": "plan.md", "content": 'a\n"b" ü', "n": [1, 2]})
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
        "no_tool_call",
        "unclosed_tool_call",
        "bad_json",
        "not_an_object",
        "missing_name",
        "bad_arguments",
        "multiple_tool_calls",
        "unknown_tool",
    }


def test_render_rejects_nameless_call():
    with pytest.raises(ValueError, match="string 'name'"):
        render_tool_call({"arguments": {}})


_HOSTILE = {
    "nested 1,200 deep": '{"name": "x", "arguments": {"a": ' + "[" * 1200 + "]" * 1200 + "}}",
    "unclosed 100,000 deep": "[" * 100_000,
    "5,000-digit integer": '{"name": "x", "arguments": {"a": ' + "9" * 5000 + "}}",
    "overflowing float": '{"name": "x", "arguments": {"a": 1e999}}',
    "NaN literal": '{"name": "x", "arguments": {"a": NaN}}',
    "lone surrogate": '{"name": "x", "arguments": {"a": "\\ud800"}}',
}


@pytest.mark.parametrize("body", list(_HOSTILE.values()), ids=list(_HOSTILE))
def test_hostile_bodies_become_bad_json_and_never_raise(body):
    out = parse_tool_call(f"<tool_call>{body}</tool_call>")
    assert out.reason == "bad_json" and "rejected" in out.detail


def test_bounded_bodies_within_limits_still_parse():
    import json

    text = '<tool_call>{"name": "x", "arguments": {"emoji": "\\ud83d\\ude00", "n": -12.5e3, "deep": [[[[1]]]]}}</tool_call>'
    call = parse_tool_call(text)
    assert call.arguments == {"emoji": "\U0001f600", "n": -12500.0, "deep": [[[[1]]]]}
    json.dumps(call.as_dict(), ensure_ascii=False).encode("utf-8")


def test_random_text_never_raises_and_accepted_calls_serialise():
    import json
    import random

    rng = random.Random(0)
    alphabet = [
        "{",
        "}",
        "[",
        "]",
        '"',
        "\\",
        ":",
        ",",
        "1",
        "e",
        "9",
        "u",
        "d",
        "8",
        "0",
        "a",
        " ",
        "name",
        "arguments",
        '"name": "f"',
        "<tool_call>",
        "</tool_call>",
        "NaN",
        "-",
        ".",
        "\ud7ff",
        "\u00e9",
    ]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 60)))
        out = parse_tool_call(f'<tool_call>{{"name": "f", "arguments": {{"a": {text}}}}}</tool_call>')
        if hasattr(out, "arguments"):
            json.dumps(out.as_dict(), ensure_ascii=False).encode("utf-8")
        else:
            assert out.reason in {
                "bad_json",
                "bad_arguments",
                "multiple_tool_calls",
                "not_an_object",
                "missing_name",
                "unclosed_tool_call",
            }
