"""An OpenAI-compatible chat endpoint as config: the fields `bat.bank.llm_client.ChatClient` calls it with (shared
by the LLM teacher, the task writer and the skill writer)."""

from __future__ import annotations

from pydantic import Field

from bat.config.base import Section


class LlmEndpointConfig(Section):
    """A teacher model behind an OpenAI-compatible endpoint (`/v1/chat/completions`), as `ChatClient` calls it."""

    base_url: str = Field("http://127.0.0.1:8000/v1", pattern=r"^https?://")
    """Endpoint root, e.g. `http://127.0.0.1:8000/v1` of `vllm serve` or SGLang."""
    model: str = "teacher"
    """Model name sent in the request."""
    api_key_env: str = "BAT_TEACHER_API_KEY"
    """Environment variable holding the API key (the key itself never lives in config)."""
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    """Sampling temperature of the model."""
    max_tokens: int = Field(1024, ge=16)
    """Completion cap per response."""
    timeout_s: float = Field(60.0, gt=0.0)
    """HTTP timeout per request."""
    retries: int = Field(2, ge=0, le=10)
    """Retries after a failed request before the call gives up (an LLM teacher's trajectory is then dropped as
    unchecked; a task writer's proposal is rejected as `endpoint_error`)."""
