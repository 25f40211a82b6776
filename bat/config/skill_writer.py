"""Endpoint and reply limits of the LLM stage-skill writer (`bank.skill_writer: llm`, paper §2.3).

The writer rewrites a stage's public skill text (kappa) from the controller evaluation's aggregate numbers only;
`bat.bank.skill_writer` sends the requests and validates the replies.
"""

from __future__ import annotations

from pydantic import Field

from bat.config.endpoint import LlmEndpointConfig

MAX_SKILL_CHARS = 1500
"""Default cap on a rewritten skill text: about four times the longest static skill (`STAGE_SKILLS`), room for a
goal, its checks and recovery steps, short enough to keep every stage row's prompt small."""


class SkillWriterConfig(LlmEndpointConfig):
    """An OpenAI-compatible endpoint (`/v1/chat/completions`) that rewrites stage skill texts."""

    model: str = "skill-writer"
    """Model name sent in the request."""
    api_key_env: str = "BAT_SKILL_WRITER_API_KEY"
    """Environment variable holding the API key (the key itself never lives in config)."""
    max_tokens: int = Field(768, ge=16)
    """Completion cap per request (one request per stage)."""
    max_chars: int = Field(MAX_SKILL_CHARS, ge=50, le=20_000)
    """Longest usable skill text in characters; a longer reply keeps the static text (reason `too_long`), it is
    never clipped."""
