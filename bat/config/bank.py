"""Stage Bank knobs: how many practice tasks, who writes them, teacher, SFT length limit and split, E2E reduction
grid, limit H."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from bat.config.base import Section
from bat.config.endpoint import LlmEndpointConfig
from bat.config.skill_writer import SkillWriterConfig


class LlmTeacherConfig(LlmEndpointConfig):
    """Optional LLM teacher that runs practice tasks through an OpenAI-compatible endpoint."""


class LlmTaskWriterConfig(LlmEndpointConfig):
    """Optional LLM task writer (paper §2.1, Data Factory: teachers write fictional tasks): an OpenAI-compatible
    endpoint proposes each practice task's parameters as JSON (`bat.bank.task_writer`)."""

    proposals_per_task: int = Field(3, ge=1, le=20)
    """Proposals asked for one task slot before the slot is left unfilled (each rejected one is counted with its
    reason in the manifest's `counts.task_writer`)."""


class BankConfig(Section):
    seed: int | None = Field(None, ge=0)
    """Bank seed; None uses `run.seed`. Same seed and config, same bank content (MANIFEST fingerprint)."""
    tracks: tuple[str, ...] | None = None
    """Tracks to synthesise; None takes every track of the benchmark."""
    tasks_per_track: int = Field(2, ge=1, le=10_000)
    """Fictional practice tasks per track and outcome variant (stage rows come from each)."""
    track_tasks: dict[str, int] = Field(default_factory=dict)
    """Tasks per outcome variant for the named tracks, overriding `tasks_per_track` there (a steered refresh sets
    it from the controller's aggregates; empty: every track gets `tasks_per_track`)."""
    refresh_steering: Literal["weakness", "off"] = "weakness"
    """How an asynchronous refresh (refresh k >= 1) shares its tasks among tracks. `weakness` (paper §2.1: synthesis
    steered by aggregate statistics): the same total, split in proportion to 1 - track Overall (in [0, 1]) of the newest
    controller aggregate before round k (aggregates only), at least one per track; `off`: `tasks_per_track` each."""
    skill_writer: Literal["static", "llm"] = "static"
    """Where the stage skill texts (kappa) of a bank version come from. `static`: `bat.benchmark.STAGE_SKILLS`.
    `llm` (paper §2.3, skills distilled from LLM prescriptions): a refresh k >= 1 asks `skill_llm` to rewrite each
    stage's skill from the newest controller aggregate before round k (aggregate numbers only); a reply that is not a
    usable skill keeps the static text, and a refresh without aggregates (the bootstrap) keeps every static text."""
    skill_llm: SkillWriterConfig = SkillWriterConfig()
    """Endpoint and reply cap of the LLM skill writer (used only when `skill_writer == "llm"`)."""
    skills: dict[str, str] = Field(default_factory=dict)
    """Skill texts replacing the static ones for the named stage keys (the LLM skill writer sets it; empty: every
    stage uses its static text). Keys must be configured stage keys."""
    outcomes: tuple[Literal["success", "recovery", "failure"], ...] = ("success", "recovery", "failure")
    """Outcome labels to synthesise; each maps to a teacher variant (expert / recovery / failure)."""
    e2e_per_track: int = Field(2, ge=0, le=10_000)
    """E2E surrogate candidates per track (reduced tasks run by the expert teacher)."""
    reduction_grid: str = "v1"
    """Version of the E2E reduction grid (`bat.benchmark.reduction.GRIDS`, Eq. 12): `v1` keeps every input at full size,
    `v2` also draws input fractions (lambda_input) of 0.5 and 0.25 (synthesis: 0.5) that make each case smaller."""
    rollout_limit_h: int | None = Field(24, ge=1)
    """H of Eq. 15: an E2E surrogate is accepted only if its teacher trajectory has <= H turns (reference: 24
    assistant turns). None derives it from the rollout budgets: min(rollout.budgets.max_assistant_turns,
    rollout.budgets.max_tool_calls) — use that when training rollouts run with the same budgets."""
    teacher: Literal["scripted", "llm"] = "scripted"
    """Teacher that runs the practice tasks: the benchmark's scripted variants or an LLM endpoint."""
    llm: LlmTeacherConfig = LlmTeacherConfig()
    """LLM teacher settings (used only when `teacher == "llm"`)."""
    task_writer: Literal["scripted", "llm"] = "scripted"
    """Who writes the practice tasks: `scripted` draws every parameter from a practice seed; `llm` asks the
    `task_writer_llm` endpoint for each task's parameters (track, modality, pitfalls, distractor cards, cases) and
    builds the instance from them and a practice seed (never the held-out space). Part of the bank fingerprint only
    when `llm`."""
    task_writer_llm: LlmTaskWriterConfig = LlmTaskWriterConfig()
    """LLM task writer settings (used, and fingerprinted, only when `task_writer == "llm"`)."""
    sft_max_length: int = Field(8192, ge=16)
    """SFT rows longer than this (context + target) are rejected and counted, never clipped."""
    sft_tokenizer: str | None = None
    """Tokenizer directory used to measure SFT row length; None measures approximate tokens from characters."""
    approx_chars_per_token: float = Field(3.0, gt=0.0)
    """Characters per token for the approximate length when no tokenizer is given."""
    validation_fraction: float = Field(0.1, ge=0.0, lt=1.0)
    """Fraction of trajectories (not rows) whose SFT rows go to the validation split."""
    retries: int = Field(2, ge=0, le=20)
    """Replacement practice tasks tried for a slot whose scripted teacher trajectory fails its check."""
    workers: int = Field(1, ge=1, le=256)
    """Worker processes running practice tasks in parallel (results merged in task order: same bank for any value)."""
    sft_outcomes: tuple[Literal["success", "recovery", "failure"], ...] = ("success", "recovery")
    """Outcome labels whose teacher trajectories become SFT rows (failure runs only seed RL failure states)."""
    sft_context: Literal["agent", "stage"] = "agent"
    """System turn of a stage-sliced SFT row. `agent`: the BaT Agent's own opening, every stage skill in order, the
    prompt evaluation and E2E rollouts show the policy (then all rows of a trajectory are token prefixes of its
    last row and pack into one sequence: 3.2x fewer SFT tokens per epoch on the default bank); `stage`: only the
    row's own stage skill kappa_s (paper Eq. 9), a system turn the deployed agent never sees."""

    @model_validator(mode="after")
    def _check(self) -> BankConfig:
        if not self.outcomes:
            raise ValueError("bank.outcomes is empty; valid labels: success, recovery, failure")
        if len(set(self.outcomes)) != len(self.outcomes):
            raise ValueError(f"bank.outcomes has duplicates: {list(self.outcomes)}")
        if self.tracks is not None and not self.tracks:
            raise ValueError("bank.tracks is empty; use null for every track of the benchmark")
        return self
