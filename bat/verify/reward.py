"""Reward formulas (Eq. 4 and the E2E mix) as plain functions; null stays null, never a silent 0."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bat.config.stages import DEFAULT_STAGES, StageSpec
from bat.schemas.rollout import RewardRecord, RolloutRecord


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


def reward_fields(rec: RolloutRecord, reward_version: int, judge: str) -> dict[str, Any]:
    """The identity fields every reward record of `rec` carries (rollout, state, round, pool, stage, versions)."""
    return dict(
        rollout_id=rec.rollout_id,
        state_id=rec.state_id,
        round=rec.round,
        pool=rec.pool,
        stage=rec.stage,
        reward_version=reward_version,
        judge=judge,
    )


def invalid_reward(fields: Mapping[str, Any], reason: str, **extra: Any) -> RewardRecord:
    """An invalid reward record (no reward) with `reason`; `extra` may carry the item verdicts (`items`)."""
    return RewardRecord(
        **fields, items=extra.pop("items", []), reward=None, valid=False, invalid_reason=reason, **extra
    )
