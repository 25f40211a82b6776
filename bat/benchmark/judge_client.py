"""LLM judge over an OpenAI-compatible `/chat/completions` endpoint, with strict replies.

The judge must answer one JSON object `{"verdicts": {"<item_id>": true|false, ...}}` holding exactly the
requested item ids. A timeout, HTTP error, non-JSON reply, missing/extra ids or non-boolean values is
retried up to `max_retries` times; after that every requested item is `None` (never a silent 0), which
makes the rollout invalid for training.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bat.config.verify import JudgeConfig
from bat.httpjson import HttpError, post_json

SYSTEM_PROMPT = (
    "You are a strict rubric judge. For each rubric item decide from the execution evidence alone whether "
    "it is satisfied. Claims in the agent's prose that no execution record supports do not count. Reply "
    'with one JSON object and nothing else: {"verdicts": {"<item_id>": true or false, ...}} using exactly '
    "the item ids you were given."
)


@dataclass(frozen=True)
class JudgeItem:
    """One rubric item to judge: id and criterion text."""

    id: str
    text: str


@dataclass
class JudgeResult:
    """Verdicts per requested id (all None on failure), attempts made and the last error."""

    verdicts: dict[str, bool | None]
    attempts: int
    error: str | None = None
    errors: list[str] = field(default_factory=list)


class JudgeReplyError(ValueError):
    """The judge's reply is not the strict JSON object asked for."""


def parse_reply(content: str, item_ids: Sequence[str]) -> dict[str, bool]:
    """Strictly parse a judge reply into {item_id: bool}; raises JudgeReplyError naming what is wrong."""
    try:
        obj = json.loads(content.strip())
    except (json.JSONDecodeError, AttributeError) as exc:
        raise JudgeReplyError(f"reply is not JSON: {str(content)[:120]!r}") from exc
    if not isinstance(obj, dict) or set(obj) != {"verdicts"} or not isinstance(obj["verdicts"], dict):
        raise JudgeReplyError('reply must be exactly {"verdicts": {...}}')
    verdicts = obj["verdicts"]
    wanted = set(item_ids)
    if set(verdicts) != wanted:
        missing, extra = sorted(wanted - set(verdicts)), sorted(set(verdicts) - wanted)
        raise JudgeReplyError(
            f"reply item ids do not match: missing {missing}, unexpected {extra}; valid ids: {sorted(wanted)}"
        )
    bad = sorted(k for k, v in verdicts.items() if not isinstance(v, bool))
    if bad:
        raise JudgeReplyError(f"verdicts must be true/false; not boolean: {bad}")
    return {k: bool(v) for k, v in verdicts.items()}


class JudgeClient:
    """Judge client for one endpoint + model; `identity` is recorded in every RewardRecord."""

    def __init__(self, cfg: JudgeConfig) -> None:
        self.cfg = cfg
        self.url = cfg.base_url.rstrip("/") + "/chat/completions"
        self.identity = f"{cfg.model}@{cfg.base_url}"

    def messages(self, items: Sequence[JudgeItem], context: str) -> list[dict[str, str]]:
        """The chat request: system rules + items + the tail of the evidence context."""
        listing = "\n".join(f"- {it.id}: {it.text}" for it in items)
        ctx = context[-self.cfg.max_context_chars :]
        user = (
            f"Rubric items:\n{listing}\n\nExecution evidence:\n{ctx}\n\nItem ids: {json.dumps([i.id for i in items])}"
        )
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]

    def judge(self, items: Sequence[JudgeItem], context: str) -> JudgeResult:
        """Ask for verdicts on `items`; bounded retries; on failure every item is None."""
        ids = [it.id for it in items]
        if not ids:
            return JudgeResult(verdicts={}, attempts=0)
        body: dict[str, Any] = {
            "model": self.cfg.model,
            "messages": self.messages(items, context),
            "temperature": 0.0,
            "max_tokens": self.cfg.max_tokens,
            "response_format": {"type": "json_object"},
        }
        errors: list[str] = []
        for attempt in range(1, self.cfg.max_retries + 2):
            try:
                reply = post_json(self.url, body, timeout_s=self.cfg.timeout_s, api_key_env=self.cfg.api_key_env)
                content = reply["choices"][0]["message"]["content"]
                return JudgeResult(verdicts=dict(parse_reply(content, ids)), attempts=attempt, errors=errors)
            except (HttpError, JudgeReplyError) as exc:
                errors.append(str(exc))
            except (KeyError, IndexError, TypeError) as exc:
                errors.append(f"reply lacks choices[0].message.content: {type(exc).__name__}: {exc}")
        return JudgeResult(
            verdicts=dict.fromkeys(ids), attempts=self.cfg.max_retries + 1, error=errors[-1], errors=errors
        )
