"""Training signal per pool: reward means and GRPO groups whose rewards are all equal."""

from __future__ import annotations

import pytest

from bat.schemas.rollout import RewardRecord
from bat.verify.signal import pool_signal


def _reward(state: str, pool: str, k: int, reward: float | None, valid: bool = True) -> RewardRecord:
    return RewardRecord(
        rollout_id=f"{state}-k{k}",
        state_id=state,
        round=1,
        pool=pool,
        stage="S1",
        items=[],
        reward=reward,
        valid=valid,
        invalid_reason=None if valid else "error: engine",
        reward_version="v1",
        judge="rubric",
    )


def test_pool_signal_counts_identical_groups_per_pool():
    rewards = [_reward("a", "S-target", k, r) for k, r in enumerate([0.0, 0.5, 0.0, 0.0])]
    rewards += [_reward("b", "S-target", k, 0.25) for k in range(4)]
    rewards += [_reward("c", "E2E", k, 0.0) for k in range(3)] + [_reward("c", "E2E", 3, None, valid=False)]
    rewards += [_reward("d", "S-mix", 0, 1.0)]  # a lone valid rollout is no group
    got = pool_signal(rewards)
    assert got["S-target"] == {"rewards": 8, "reward_mean": (0.5 + 1.0) / 8, "groups": 2, "groups_identical": 1}
    assert got["E2E"] == {"rewards": 3, "reward_mean": 0.0, "groups": 1, "groups_identical": 1}
    assert got["S-mix"]["groups"] == 0 and got["S-mix"]["reward_mean"] == 1.0
    assert pool_signal([]) == {}


def test_identical_subset_probability_counts_all_equal_draws():
    from bat.verify.signal import equal_classes, identical_subset_probability

    assert equal_classes([0.0, 1.0, 0.0, 0.5, 1.0 + 1e-12]) == [2, 1, 2]
    # 8 rewards: 6 zeros and 2 ones; pairs: (C(6,2) + C(2,2)) / C(8,2) = 16 / 28
    group = [0.0] * 6 + [1.0] * 2
    assert identical_subset_probability(group, 2) == 16 / 28
    assert identical_subset_probability(group, 6) == 1 / 28
    assert identical_subset_probability(group, 8) == 0.0
    assert identical_subset_probability([0.3] * 8, 4) == 1.0
    with pytest.raises(ValueError, match="between 2 and"):
        identical_subset_probability(group, 9)


def test_group_size_signal_at_the_full_size_is_the_observed_count():
    from bat.verify.signal import group_size_of, rewards_by_group

    def group_size_signal(records, sizes):
        return group_size_of(rewards_by_group(records), sizes)

    rewards = [_reward("a", "S-target", k, r) for k, r in enumerate([0.0] * 3 + [1.0])]
    rewards += [_reward("b", "S-target", k, 0.5) for k in range(4)]
    rewards += [_reward("c", "E2E", k, 0.0) for k in range(2)]  # too few for k 4: counted at k 2 only
    got = group_size_signal(rewards, [2, 4])
    observed = pool_signal(rewards)["S-target"]["groups_identical"]
    assert got["S-target"] == {"groups": {2: 2, 4: 2}, "identical": {2: 1 + 3 / 6, 4: float(observed)}}
    assert got["E2E"] == {"groups": {2: 1, 4: 0}, "identical": {2: 1.0, 4: 0}}
    with pytest.raises(ValueError, match=">= 2"):
        group_size_signal(rewards, [1, 4])
