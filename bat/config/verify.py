"""Verifier knobs: reward version, E2E mix, optional LLM judge over an OpenAI-compatible endpoint."""

from __future__ import annotations

from typing import Literal

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
    """Rubric verifier: r = eta * mean(v) for stage rows (Eq. 4); E2E rows by `e2e_reward`."""

    reward_version: str = Field("bat-rubric-v3", pattern=r"^[A-Za-z0-9_.-]+$")
    """Recorded in every RewardRecord and the round report; bump when reward logic changes (v2: E2E rows use the
    union rubric by default; v3: a stage row's evidence comes from the rollout's own calls, `stage_evidence`)."""
    stage_evidence: Literal["rollout", "trajectory"] = "rollout"
    """Whose execution records confirm a stage row's evidence (eta of Eq. 4). `rollout`: only the calls the rollout
    made, so a state whose replayed prefix already holds the stage's records (a recovery state's failed pilot and
    check) earns no eta for them and a rollout that does nothing scores 0. `trajectory` (reward v2): prefix +
    rollout. Item verdicts always read the whole trajectory (s3c_failure_fixed needs the prefix's failing pilot);
    artifact evidence (plan.md, outputs/, submission/) reads the final workspace either way. E2E rows start from
    an empty prefix, so both read the same."""
    e2e_reward: Literal["union_rubric", "stage_mix"] = "union_rubric"
    """Reward of an E2E row. `union_rubric` (the paper: Eq. 4 over the union of the stage contracts, Eq. 14):
    r = eta * mean of every applicable item's verdict, eta the fraction of the union's evidence confirmed.
    `stage_mix`: w * (stage-weighted mean of eta_s * stage score) + (1 - w) * task score, w = `e2e_stage_weight`
    (it also rewards the task metric itself; see docs/benchmark.md)."""
    final_reward: Literal["task", "overall"] = "task"
    """What a round with the single final reward (`reward_mode: final`, the grpo arm's E2E rows) pays each rollout.
    `task` (the paper's GRPO baseline: "a single final task reward on E2E data"): the Task score of the submitted
    result alone, 0 for a rollout that submits nothing. `overall`: the benchmark's Overall (Task and Agentic with
    equal weight), which already carries the stage rubric through Agentic."""
    e2e_stage_weight: float = Field(0.5, ge=0.0, le=1.0)
    """`stage_mix` only: weight of the weighted stage mean in the E2E reward; the task score gets 1 - this."""
    artifact_owners: dict[str, tuple[str, ...]] = Field(
        default_factory=lambda: {"plan.md": ("write_plan",), "outputs/": ("run_model",), "submission/": ("submit",)}
    )
    """Workspace path (or `dir/` prefix) -> tools whose writes count as evidence there; other writers are ignored."""
    judge: JudgeConfig = JudgeConfig()
    """LLM judge settings."""
