"""Held-out evaluation knobs: uncertainty, sampling, splits, raw-record retention, held-out guard.

The suite shape (tracks, repeats, seeds, external evaluator) belongs to the `benchmark` section; the multi-turn
budgets to `rollout.budgets`; this section holds only what the evaluation itself decides.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from bat.config.base import Section


class StageProbeConfig(Section):
    """The held-out stage probe (`bat evaluate probe`): stage states replayed from the expert on held-out
    instances of the probe's own split, scored per stage by K rollouts that end at the stage exit."""

    tasks_per_track: int = Field(1, ge=1, le=100)
    """Held-out probe instances per track; each gives one state per stage the expert reaches."""
    tracks: tuple[str, ...] = ()
    """Tracks the probe draws from (empty = every `benchmark.tracks` entry)."""
    stages: tuple[str, ...] = ()
    """Stages the probe builds states for (empty = every configured stage)."""
    k: int = Field(4, ge=1, le=64)
    """Rollouts per probe state (their mean is the state's score, the statistical unit)."""
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    """Sampling temperature of probe rollouts (None = `rollout.temperature`, what training rollouts use)."""


class EvaluateConfig(Section):
    agent: Literal["policy", "expert", "noop", "skip-validate", "recovery", "failure"] = "policy"
    """`policy` evaluates the round's checkpoint; a scripted agent name evaluates that benchmark agent instead
    (reference points and pipeline smoke tests; its "checkpoint" is recorded as `scripted:<agent>`)."""
    confidence: float = Field(0.95, gt=0.5, lt=1.0)
    """Confidence level of the t-based half-widths across track means."""
    temperature: float = Field(0.7, ge=0.0, le=2.0)
    """Sampling temperature of evaluation runs (0 = greedy); each repeat has its own sampling seed."""
    final_eval: Literal["every_round", "last_round", "never"] = "last_round"
    """When the final split (disjoint runs, never read by routing) is evaluated on the round's candidate."""
    test_split: bool = True
    """Evaluate the untouched test split once, at the end of the run, on the retained best checkpoint."""
    keep_raw_runs: bool = True
    """Keep raw per-run records on the held-out side (False = discard them after aggregation)."""
    keep_transcripts: bool = True
    """Keep every run's transcript (generated text, parsed call or parse error, observation, stage tag, per turn)
    and its failure breakdown on the held-out side (`transcripts.jsonl`, for `bat evaluate explain`). The
    aggregate's failure counts are written either way."""
    null_retries: int = Field(1, ge=0, le=10)
    """Re-runs of a run whose cells came back infrastructure-null before the nulls are reported."""
    base_model: bool = True
    """Round 0's evaluate also scores the untrained base policy on the controller split (before the SFT export),
    written as `aggregate_controller_base.json`; reports show base vs SFT vs RL. Reporting only: routing and the
    promotion gate never read it."""
    parallel_runs: int = Field(8, ge=1)
    """Held-out runs driven in lockstep by one engine (batched generation)."""
    heldout_phases: tuple[str, ...] = ("evaluate", "final_test")
    """Phases allowed to open files under `state/<run>/heldout/`; every other phase runs under the guard."""
    guard: bool = True
    """Install the held-out guard (audit hook) around phases not in `heldout_phases`."""
    stage_probe: StageProbeConfig = StageProbeConfig()
    """The held-out stage probe: its size (instances per track, stages, rollouts per state) and sampling."""
