"""Verifier knobs: reward version, E2E mix, optional LLM judge over an OpenAI-compatible endpoint."""

from __future__ import annotations

from pydantic import Field

from bat.config.base import Section


class JudgeConfig(Section):
    """LLM judge for rubric items that need judgment (off by default: deterministic proxies decide)."""

    enabled: bool = False
    """Send judgment items to the judge; when False the benchmark's documented proxy decides them."""
    base_url: str = "http://127.0.0.1:8001/v1"
    """OpenAI-compatible base URL including `/v1` (`/chat/completions` is appended)."""
    model: str = "judge"
    """Model name sent to the endpoint; recorded with the endpoint as the judge identity."""
    api_key_env: str = "BAT_JUDGE_API_KEY"
    """Environment variable holding the API key (unset = no Authorization header)."""
    timeout_s: float = Field(60.0, gt=0)
    """Per-request timeout."""
    max_retries: int = Field(2, ge=0, le=10)
    """Retries after a timeout, HTTP error or invalid reply; then every requested item is null."""
    max_tokens: int = Field(512, ge=16)
    """Reply token cap."""
    max_context_chars: int = Field(12000, ge=256)
    """Characters of rollout evidence sent to the judge (the tail is kept)."""


class VerifyConfig(Section):
    """Rubric verifier: r = eta * mean(v) for stage rows; E2E = w * weighted stage mean + (1-w) * task."""

    reward_version: str = Field("bat-rubric-v1", pattern=r"^[A-Za-z0-9_.-]+$")
    """Recorded in every RewardRecord and the round report; bump when reward logic changes."""
    e2e_stage_weight: float = Field(0.5, ge=0.0, le=1.0)
    """Weight of the weighted stage mean in the E2E reward; the task score gets 1 - this (reference 0.5)."""
    artifact_owners: dict[str, tuple[str, ...]] = Field(
        default_factory=lambda: {"plan.md": ("write_plan",), "outputs/": ("run_model",), "submission/": ("submit",)}
    )
    """Workspace path (or `dir/` prefix) -> tools whose writes count as evidence there; other writers are ignored."""
    judge: JudgeConfig = JudgeConfig()
    """LLM judge settings."""
