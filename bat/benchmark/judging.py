"""The LLM judge for judgment items when `verify.judge.enabled` (the verifier's client, so both sides agree).

`config_judge(config) -> (judge | None, identity)`: `judge(item, plan_text) -> bool | None`; a judge that
fails after its retries returns None, which makes the stage null (reported, never scored as 0).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bat.benchmark.contract import RubricItem

Judge = Callable[[RubricItem, str], "bool | None"]


def config_judge(config: Any) -> tuple[Judge | None, str]:
    """The configured judge callable and its identity, or (None, "") when the judge is off."""
    settings = config.verify.judge
    if not settings.enabled:
        return None, ""
    from bat.benchmark.judge_client import JudgeClient, JudgeItem

    client = JudgeClient(settings)

    def judge(item: RubricItem, text: str) -> bool | None:
        return client.judge([JudgeItem(item.id, item.text)], f"plan.md:\n{text}").verdicts.get(item.id)

    return judge, client.identity
