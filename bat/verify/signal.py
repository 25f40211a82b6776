"""Training signal of a round's rewards, per pool: how much reward there is, and how many GRPO groups can learn.

A GRPO group is the K rollouts of one state (`state_id`); when all its valid rewards are equal its advantages are
all zero and it contributes no gradient. `group_size_of` asks what a smaller K would have left: the expected
number of such groups had each group drawn k of its K rollouts. Reads reward records only (training side); writes
nothing.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from bat.schemas.rollout import RewardRecord


def rewards_by_group(rewards: Iterable[RewardRecord]) -> dict[str, dict[str, list[float]]]:
    """pool -> state_id (one GRPO group) -> its valid rewards, in record order."""
    groups: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rewards:
        if r.valid and r.reward is not None:
            groups[r.pool][r.state_id].append(float(r.reward))
    return groups


def pool_signal(rewards: Iterable[RewardRecord], tolerance: float = 1e-9) -> dict[str, dict[str, Any]]:
    """Per pool: `rewards` (valid ones), `reward_mean`, `groups` (states with >= 2 valid rewards) and
    `groups_identical` (of those, groups whose rewards are all within `tolerance` of each other)."""
    groups = rewards_by_group(rewards)
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


def equal_classes(values: Iterable[float], tolerance: float = 1e-9) -> list[int]:
    """Sizes of the classes of equal rewards in `values`: sorted, a class takes each value within `tolerance` of
    its first member."""
    sizes: list[int] = []
    first: float | None = None
    for value in sorted(values):
        if first is None or value - first > tolerance:
            sizes.append(0)
            first = value
        sizes[-1] += 1
    return sizes


def identical_subset_probability(values: Sequence[float], k: int, tolerance: float = 1e-9) -> float:
    """Probability that `k` rewards drawn without replacement from one group's `values` are all equal, i.e. that a
    GRPO group of size k sampled from the same rollouts would carry no gradient: sum_c C(n_c, k) / C(n, k) over the
    classes of equal rewards. Raises ValueError unless 2 <= k <= len(values)."""
    if not 2 <= k <= len(values):
        raise ValueError(f"group size k must be between 2 and the group's {len(values)} rewards, got {k}")
    return sum(math.comb(n, k) for n in equal_classes(values, tolerance)) / math.comb(len(values), k)


def group_size_of(
    groups: dict[str, dict[str, list[float]]], sizes: Sequence[int], tolerance: float = 1e-9
) -> dict[str, dict[str, Any]]:
    """Per pool of `groups` (pool -> state_id -> valid rewards): `groups` {k: states with at least k rewards} and
    `identical` {k: expected count over those of groups whose k rewards drawn without replacement are all equal, the
    sum of `identical_subset_probability`}. At k equal to a group's size the expected count is the observed one.
    Raises ValueError for an empty `sizes` or a size below 2."""
    if not sizes or min(sizes) < 2:
        raise ValueError(f"group sizes must be given and each >= 2, got {list(sizes)}")
    out: dict[str, dict[str, Any]] = {}
    for pool in sorted(groups):
        members = list(groups[pool].values())
        out[pool] = {
            "groups": {k: sum(1 for g in members if len(g) >= k) for k in sizes},
            "identical": {
                k: sum(identical_subset_probability(g, k, tolerance) for g in members if len(g) >= k) for k in sizes
            },
        }
    return out
