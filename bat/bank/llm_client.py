"""Minimal client for an OpenAI-compatible `/chat/completions` endpoint (vllm serve, SGLang, ...), stdlib only.

Reads: the endpoint URL, model name and an API key from an environment variable named in config.
Returns the assistant text of the first choice; tool calls returned in OpenAI's structured
`tool_calls` field are rendered into the project's `<tool_call>{...}</tool_call>` text format.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bat.config.endpoint import LlmEndpointConfig
from bat.policy.codec import render_tool_call


class TeacherEndpointError(RuntimeError):
    """The endpoint failed after every retry, or answered with something that is not a completion."""


@dataclass(frozen=True)
class ChatClient:
    """One OpenAI-compatible chat endpoint."""

    config: LlmEndpointConfig

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.config.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        url = self.config.base_url.rstrip("/") + "/chat/completions"
        request = urllib.request.Request(url, json.dumps(payload).encode("utf-8"), self._headers(), method="POST")
        with urllib.request.urlopen(request, timeout=self.config.timeout_s) as response:
            return json.loads(response.read().decode("utf-8"))

    def complete(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None) -> str:
        """Assistant text for `messages` (OpenAI chat format); retries `config.retries` times, then raises."""
        payload: dict[str, Any] = {
            "model": self.config.model,
            "messages": list(messages),
            "temperature": self.config.temperature,
            "max_tokens": self.config.max_tokens,
        }
        if tools:
            payload["tools"] = [{"type": "function", "function": dict(spec)} for spec in tools]
        errors: list[str] = []
        for attempt in range(self.config.retries + 1):
            try:
                return _assistant_text(self._post(payload))
            except (urllib.error.URLError, TimeoutError, OSError, ValueError, KeyError, TypeError) as exc:
                errors.append(f"attempt {attempt + 1}: {type(exc).__name__}: {exc}")
                if attempt < self.config.retries:
                    time.sleep(min(2.0, 0.2 * (attempt + 1)))
        raise TeacherEndpointError(f"teacher endpoint {self.config.base_url} failed: " + "; ".join(errors))


def _assistant_text(reply: dict[str, Any]) -> str:
    """Text of choice 0; structured tool calls become `<tool_call>` text after the content."""
    message = reply["choices"][0]["message"]
    content = message.get("content") or ""
    calls = message.get("tool_calls") or []
    if not calls:
        if not isinstance(content, str):
            raise ValueError(f"completion content is not text: {type(content).__name__}")
        return content
    function = calls[0].get("function", calls[0])
    arguments = function.get("arguments", {})
    if isinstance(arguments, str):
        arguments = json.loads(arguments or "{}")
    return render_tool_call({"name": function["name"], "arguments": arguments}, thought=content)
