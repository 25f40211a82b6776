"""Training signal per pool: reward means and GRPO groups whose rewards are all equal."""

from __future__ import annotations

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
