"""Training signal of a round's rewards, per pool: how much reward there is, and how many GRPO groups can learn.

A GRPO group is the K rollouts of one state (`state_id`); when all its valid rewards are equal its advantages are
all zero and it contributes no gradient. Reads reward records only (training side); writes nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from bat.schemas.rollout import RewardRecord


def pool_signal(rewards: Iterable[RewardRecord], tolerance: float = 1e-9) -> dict[str, dict[str, Any]]:
    """Per pool: `rewards` (valid ones), `reward_mean`, `groups` (states with >= 2 valid rewards) and
    `groups_identical` (of those, groups whose rewards are all within `tolerance` of each other)."""
    groups: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rewards:
        if r.valid and r.reward is not None:
            groups[r.pool][r.state_id].append(float(r.reward))
    out: dict[str, dict[str, Any]] = {}
    for pool in sorted(groups):
        values = [v for group in groups[pool].values() for v in group]
        learnable = [g for g in groups[pool].values() if len(g) >= 2]
        out[pool] = {
            "rewards": len(values),
            "reward_mean": sum(values) / len(values) if values else None,
            "groups": len(learnable),
            "groups_identical": sum(1 for g in learnable if max(g) - min(g) <= tolerance),
        }
    return out
