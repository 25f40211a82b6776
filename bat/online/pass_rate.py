"""The pass-rate filter of an online block (`grpo.pass_rate_filter`): Stage Bank states the current policy always
fails or always solves carry no GRPO signal, so after `draws` such draws in a row a state is set aside for the rest
of the block (counted per pool). The filter's history is rebuilt from the block's own reward shards on resume, so
a resumed block sets aside the same states an uninterrupted one would.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from bat.schemas.rollout import RewardRecord
from bat.state.online_layout import OnlineLayout
from bat.state.round_layout import ShardLayout
from bat.verify.shards import read_reward_shard

FAIL, SOLVE, MIXED = "fail", "solve", "mixed"


def outcome(values: Sequence[float], tolerance: float = 1e-9) -> str:
    """`fail` (every reward 0), `solve` (every reward 1) or `mixed` for one group's valid rewards."""
    if values and max(values) <= tolerance:
        return FAIL
    if values and min(values) >= 1.0 - tolerance:
        return SOLVE
    return MIXED


@dataclass
class PassRateFilter:
    """Which states are set aside; `draws` = 0 sets none aside."""

    draws: int
    history: dict[str, list[str]] = field(default_factory=dict)
    set_aside: dict[str, str] = field(default_factory=dict)
    """state id -> pool, in the order they were set aside."""

    def observe(self, rewards: Iterable[RewardRecord]) -> None:
        """Record one draw of each state's group in `rewards`; set aside those `draws` times fail (or solve) in a
        row."""
        groups: dict[str, list[float]] = {}
        pools: dict[str, str] = {}
        for r in rewards:
            pools[r.state_id] = r.pool
            if r.valid and r.reward is not None:
                groups.setdefault(r.state_id, []).append(float(r.reward))
        for state, values in groups.items():
            seen = self.history.setdefault(state, [])
            seen.append(outcome(values))
            last = seen[-self.draws :] if self.draws else []
            if self.draws and len(last) == self.draws and len(set(last)) == 1 and last[0] != MIXED:
                self.set_aside.setdefault(state, pools[state])

    def allows(self, state: str) -> bool:
        return state not in self.set_aside

    def counts(self) -> dict[str, int]:
        """States set aside so far, per pool."""
        return dict(sorted(Counter(self.set_aside.values()).items()))


def replayed(draws: int, layout: OnlineLayout, steps: int) -> PassRateFilter:
    """The filter after the first `steps` steps of the block at `layout`, from their reward shards (every draw)."""
    rate = PassRateFilter(draws)
    for step in range(steps):
        attempt = 0
        while ShardLayout(layout.rewards(step, attempt)).is_done():
            rate.observe(read_reward_shard(layout.rewards(step, attempt)))
            attempt += 1
    return rate
