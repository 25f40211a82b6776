"""What an online step's rewards say: the groups that carry no signal, and the means by pool (the twin's
permutation is `bat.train.twin`)."""

from __future__ import annotations

from collections.abc import Sequence

from bat.schemas.rollout import RewardRecord
from bat.train.twin import scored


def identical_groups(rewards: Sequence[RewardRecord], tolerance: float = 1e-9) -> list[str]:
    """State ids whose valid rewards are all equal (a GRPO group with no signal), in first-seen order."""
    groups: dict[str, list[float]] = {}
    for r in rewards:
        if r.valid and r.reward is not None:
            groups.setdefault(r.state_id, []).append(float(r.reward))
    return [s for s, v in groups.items() if max(v) - min(v) <= tolerance]


def mean_reward(rewards: Sequence[RewardRecord]) -> float | None:
    """Mean reward of the valid records (None without one)."""
    values = [float(rewards[i].reward) for i in scored(rewards)]  # type: ignore[arg-type]
    return sum(values) / len(values) if values else None


def mean_by_pool(rewards: Sequence[RewardRecord]) -> dict[str, float]:
    """Mean valid reward per pool."""
    pools: dict[str, list[float]] = {}
    for r in rewards:
        if r.valid and r.reward is not None:
            pools.setdefault(r.pool, []).append(float(r.reward))
    return {p: sum(v) / len(v) for p, v in sorted(pools.items())}
