"""Re-verify a finished round's recorded rollouts under another reward config, writing nothing in the run.

Answers "how much training signal would this round have had under reward setting X?" without new rollouts: every
finished rollout shard of `round_NN/rollout/` is verified again (the same grader, bank rows and evidence) with the
given config, in a scratch dir that is removed afterwards, and compared per pool with the rewards the round recorded
(`round_NN/verify/`). Reads the plan, the bank and the rollout and verify shards; writes nothing under the run.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.verify.signal import pool_signal

if TYPE_CHECKING:
    from bat.config.root import BatConfig
    from bat.schemas.rollout import RewardRecord
    from bat.state.layout import RunLayout


def rescore_round(config: BatConfig, layout: RunLayout, round_index: int) -> list[RewardRecord]:
    """The rewards of every finished rollout shard of the round, verified again under `config` (the plan's reward
    mode, its pinned bank version). Raises FileNotFoundError when the round has no plan or no finished shard."""
    from bat.verify.phase import open_round, verify_shard

    _plan, bank, verifier, shards = open_round(config, layout, round_index)
    rewards: list[RewardRecord] = []
    with tempfile.TemporaryDirectory(prefix="bat-rescore-") as scratch:
        for shard in shards:
            rewards += verify_shard(verifier, shard, bank, config, Path(scratch) / shard.name)
    return rewards


def group_rewards(rewards: list[RewardRecord]) -> dict[tuple[str, str], list[float | None]]:
    """(pool, state_id) -> the group's rewards in rollout order (None for an invalid rollout)."""
    out: dict[tuple[str, str], list[float | None]] = {}
    for r in rewards:
        out.setdefault((r.pool, r.state_id), []).append(r.reward if r.valid else None)
    return out


def compare_signal(recorded: list[RewardRecord], rescored: list[RewardRecord]) -> dict[str, Any]:
    """Per pool, the recorded and the rescored `pool_signal` side by side, and per group both reward lists."""
    before, after = pool_signal(recorded), pool_signal(rescored)
    old, new = group_rewards(recorded), group_rewards(rescored)
    return {
        "pools": {p: {"recorded": before.get(p), "rescored": after.get(p)} for p in sorted(set(before) | set(after))},
        "groups": [
            {"pool": pool, "state_id": sid, "recorded": old.get((pool, sid)), "rescored": new[(pool, sid)]}
            for pool, sid in new
        ],
    }
