"""Reward formulas (Eq. 4 and the E2E mix) as plain functions; null stays null, never a silent 0."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bat.config.stages import DEFAULT_STAGES, StageSpec


def stage_reward(verdicts: Mapping[str, bool | None], eta: float | None) -> float | None:
    """r = eta * mean(v) over the row's rubric items; None when any verdict or eta is None or no item exists."""
    if not verdicts or eta is None or any(v is None for v in verdicts.values()):
        return None
    if not 0.0 <= eta <= 1.0:
        raise ValueError(f"eta must lie in [0, 1], got {eta}")
    return eta * sum(float(bool(v)) for v in verdicts.values()) / len(verdicts)


def e2e_reward(
    stage_rewards: Mapping[str, float | None],
    task_score: float | None,
    stages: Sequence[StageSpec] = DEFAULT_STAGES,
    stage_weight: float = 0.5,
    not_applicable: Sequence[str] = (),
) -> float | None:
    """w * weighted stage mean + (1 - w) * task score; the weighted mean is the benchmark's own `agentic`.

    Stages in `not_applicable` are dropped and weights renormalised; a null stage or task -> None.
    """
    from bat.benchmark.contract import agentic

    if not 0.0 <= stage_weight <= 1.0:
        raise ValueError(f"stage_weight must lie in [0, 1], got {stage_weight}")
    mean = agentic(stage_rewards, stages, not_applicable)
    if mean is None or task_score is None:
        return None
    return stage_weight * mean + (1.0 - stage_weight) * float(task_score)


def eta_from(evidence: Mapping[str, bool], required: Sequence[str]) -> float | None:
    """Evidence completeness: fraction of `required` evidence ids confirmed (1.0 when nothing is required)."""
    if not required:
        return 1.0
    return sum(1.0 for e in required if evidence.get(e)) / len(required)
