"""Tool-call text codec: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` inside an assistant turn.

`parse_tool_call` never raises: text that is not exactly one well-formed call becomes an
`InvalidAction` record whose `reason` says why (the environment turns it into an error observation).
A call body is bounded (nesting depth `MAX_JSON_DEPTH`, finite numbers of at most `MAX_NUMBER_CHARS`
characters, no unpaired surrogates), so whatever a model emits, an accepted call serialises to UTF-8 JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
MAX_JSON_DEPTH = 32
"""Deepest `[`/`{` nesting accepted in a call body (a real call nests 2-4 deep)."""
MAX_NUMBER_CHARS = 64
"""Longest number literal accepted in a call body."""

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


class _BodyError(ValueError):
    """A call body that is JSON-like but outside the accepted bounds."""


def _nesting_depth(body: str) -> int:
    """Deepest bracket nesting of `body` outside JSON strings (escapes honoured)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in body:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def _bounded_number(kind: type) -> Any:
    def parse(literal: str) -> Any:
        if len(literal) > MAX_NUMBER_CHARS:
            raise _BodyError(f"a number literal of {len(literal)} characters (at most {MAX_NUMBER_CHARS})")
        value = kind(literal)
        if isinstance(value, float) and value in (float("inf"), float("-inf")):
            raise _BodyError(f"number {literal[:20]} is out of range")
        return value

    return parse


def _reject_constant(name: str) -> Any:
    raise _BodyError(f"{name} is not a JSON number")


def _load_body(body: str) -> Any:
    """`json.loads` of a call body within the bounds; raises `json.JSONDecodeError` or `_BodyError`."""
    depth = _nesting_depth(body)
    if depth > MAX_JSON_DEPTH:
        raise _BodyError(f"nested {depth} levels deep (at most {MAX_JSON_DEPTH})")
    try:
        obj = json.loads(
            body, parse_int=_bounded_number(int), parse_float=_bounded_number(float), parse_constant=_reject_constant
        )
    except RecursionError:
        raise _BodyError(f"nested deeper than {MAX_JSON_DEPTH} levels") from None
    try:
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise _BodyError("a string holds an unpaired surrogate escape (e.g. \\ud800)") from None
    return obj


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
        obj = _load_body(body)
    except json.JSONDecodeError as exc:
        return _invalid("bad_json", text, f"tool call body is not JSON: {exc.msg} at column {exc.colno}")
    except _BodyError as exc:
        return _invalid("bad_json", text, f"tool call body rejected: {exc}")
    if not isinstance(obj, dict):
        return _invalid("not_an_object", text, f"tool call body must be a JSON object, got {type(obj).__name__}")
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return _invalid("missing_name", text, 'tool call needs a non-empty string "name"')
    arguments = obj.get("arguments", {})
    if isinstance(arguments, str):  # some models emit arguments as a JSON string
        try:
            arguments = _load_body(arguments)
        except (json.JSONDecodeError, _BodyError):
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
