"""Endpoint and reply limits of the LLM stage-skill writer (`bank.skill_writer: llm`, paper §2.3).

The writer rewrites a stage's public skill text (kappa) from the controller evaluation's aggregate numbers only;
`bat.bank.skill_writer` sends the requests and validates the replies.
"""

from __future__ import annotations

from pydantic import Field

from bat.config.base import Section

MAX_SKILL_CHARS = 1500
"""Default cap on a rewritten skill text: about four times the longest static skill (`STAGE_SKILLS`), room for a
goal, its checks and recovery steps, short enough to keep every stage row's prompt small."""


class SkillWriterConfig(Section):
    """An OpenAI-compatible endpoint (`/v1/chat/completions`) that rewrites stage skill texts."""

    base_url: str = Field("http://127.0.0.1:8000/v1", pattern=r"^https?://")
    """Endpoint root, e.g. `http://127.0.0.1:8000/v1` of `vllm serve` or SGLang."""
    model: str = "skill-writer"
    """Model name sent in the request."""
    api_key_env: str = "BAT_SKILL_WRITER_API_KEY"
    """Environment variable holding the API key (the key itself never lives in config)."""
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    """Sampling temperature of the writer (0: the same aggregates give the same request and, mostly, the same
    skills)."""
    max_tokens: int = Field(768, ge=16)
    """Completion cap per request (one request per stage)."""
    timeout_s: float = Field(60.0, gt=0.0)
    """HTTP timeout per request."""
    retries: int = Field(2, ge=0, le=10)
    """Retries after a failed request; then that stage keeps its static text (reason `endpoint_error`)."""
    max_chars: int = Field(MAX_SKILL_CHARS, ge=50, le=20_000)
    """Longest usable skill text in characters; a longer reply keeps the static text (reason `too_long`), it is
    never clipped."""
