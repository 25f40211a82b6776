"""Minimal JSON-over-HTTP client (stdlib urllib) for OpenAI-compatible servers: one POST, one timeout."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Any


class HttpError(RuntimeError):
    """A request failed: connection error, timeout, non-2xx status or a body that is not JSON."""


def post_json(url: str, body: dict[str, Any], *, timeout_s: float, api_key_env: str | None = None) -> Any:
    """POST `body` as JSON to `url`; returns the decoded JSON reply or raises HttpError (reads env for the key)."""
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    key = os.environ.get(api_key_env, "") if api_key_env else ""
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(url, data=json.dumps(body).encode("utf-8"), headers=headers, method="POST")
    return _json_reply(request, url, timeout_s)


def _json_reply(request: urllib.request.Request | str, url: str, timeout_s: float) -> Any:
    """Send `request` (a URL string is a GET) and decode its JSON reply; raises HttpError naming `url`."""
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            raw = response.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:300].decode("utf-8", errors="replace")
        raise HttpError(f"{url}: HTTP {exc.code}: {detail}") from exc
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise HttpError(f"{url}: {type(exc).__name__}: {getattr(exc, 'reason', exc)}") from exc
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise HttpError(f"{url}: reply is not JSON ({exc.msg}): {raw[:200]!r}") from exc


def post_empty(url: str, *, timeout_s: float, api_key_env: str | None = None) -> int:
    """POST with an empty body (cache-flush style endpoints); returns the HTTP status or raises HttpError."""
    headers = {}
    key = os.environ.get(api_key_env, "") if api_key_env else ""
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(url, data=b"", headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as exc:
        raise HttpError(f"{url}: HTTP {exc.code}") from exc
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise HttpError(f"{url}: {type(exc).__name__}: {getattr(exc, 'reason', exc)}") from exc


def get_json(url: str, *, timeout_s: float) -> Any:
    """GET `url`; returns the decoded JSON reply or raises HttpError."""
    return _json_reply(url, url, timeout_s)
