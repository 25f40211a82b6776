"""Tool-call text codec: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` inside an assistant turn.

`parse_tool_call` never raises: text that is not exactly one well-formed call becomes an
`InvalidAction` record whose `reason` says why (the environment turns it into an error observation).
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Literal

from pydantic import BaseModel, ConfigDict, Field

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"

INVALID_REASONS = (
    "no_tool_call",
    "unclosed_tool_call",
    "bad_json",
    "not_an_object",
    "missing_name",
    "bad_arguments",
    "multiple_tool_calls",
    "unknown_tool",
)
InvalidReason = Literal[
    "no_tool_call",
    "unclosed_tool_call",
    "bad_json",
    "not_an_object",
    "missing_name",
    "bad_arguments",
    "multiple_tool_calls",
    "unknown_tool",
]


class ToolCall(BaseModel):
    """A parsed tool call: tool name and its JSON-object arguments."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    thought: str = ""
    """Free text the model wrote before the call (kept for logs; not part of the action)."""

    def as_dict(self) -> dict[str, Any]:
        """The `{"name", "arguments"}` dict the benchmark environment's `step` accepts."""
        return {"name": self.name, "arguments": dict(self.arguments)}


class InvalidAction(BaseModel):
    """A response that is not exactly one well-formed tool call."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reason: InvalidReason
    raw: str
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        """Invalid-action record for the environment: `{"invalid": True, "reason", "detail", "raw"}`."""
        return {"invalid": True, "reason": self.reason, "detail": self.detail, "raw": self.raw}


def _invalid(reason: InvalidReason, raw: str, detail: str) -> InvalidAction:
    return InvalidAction(reason=reason, raw=raw, detail=detail)


def parse_tool_call(text: str, tool_names: Iterable[str] | None = None) -> ToolCall | InvalidAction:
    """Parse one assistant response; `tool_names`, when given, restricts the accepted names."""
    start = text.find(TOOL_CALL_OPEN)
    if start < 0:
        return _invalid("no_tool_call", text, f"no {TOOL_CALL_OPEN} block in the response")
    end = text.find(TOOL_CALL_CLOSE, start)
    if end < 0:
        return _invalid("unclosed_tool_call", text, f"{TOOL_CALL_OPEN} without {TOOL_CALL_CLOSE}")
    if text.find(TOOL_CALL_OPEN, end) >= 0:
        return _invalid("multiple_tool_calls", text, "exactly one tool call per assistant turn is allowed")
    body = text[start + len(TOOL_CALL_OPEN) : end].strip()
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as exc:
        return _invalid("bad_json", text, f"tool call body is not JSON: {exc.msg} at column {exc.colno}")
    if not isinstance(obj, dict):
        return _invalid("not_an_object", text, f"tool call body must be a JSON object, got {type(obj).__name__}")
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return _invalid("missing_name", text, 'tool call needs a non-empty string "name"')
    arguments = obj.get("arguments", {})
    if isinstance(arguments, str):  # some models emit arguments as a JSON string
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            pass
    if not isinstance(arguments, dict):
        return _invalid("bad_arguments", text, '"arguments" must be a JSON object')
    extra = sorted(set(obj) - {"name", "arguments"})
    if extra:
        return _invalid("bad_arguments", text, f"unexpected keys {extra}; valid keys: ['arguments', 'name']")
    if tool_names is not None:
        valid = sorted(tool_names)
        if name not in valid:
            return _invalid("unknown_tool", text, f"unknown tool {name!r}; valid tools: {valid}")
    return ToolCall(name=name, arguments=arguments, thought=text[:start].strip())


def render_tool_call(call: ToolCall | dict[str, Any], thought: str = "") -> str:
    """Render a call (ToolCall or `{"name", "arguments"}` dict) as assistant text; inverse of parse."""
    if isinstance(call, ToolCall):
        thought = thought or call.thought
        call = call.as_dict()
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        raise ValueError(f"a tool call needs a string 'name' and an 'arguments' object, got {call!r}")
    body = json.dumps({"name": call["name"], "arguments": call.get("arguments", {})}, ensure_ascii=False)
    block = f"{TOOL_CALL_OPEN}{body}{TOOL_CALL_CLOSE}"
    return f"{thought.strip()}\n{block}" if thought.strip() else block
