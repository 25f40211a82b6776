"""Reward shards: `verify/shard_NNNN/{rewards.jsonl, DONE.json}`, one per rollout shard, written whole."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bat.schemas.rollout import RewardRecord
from bat.state.atomic import atomic_dir, atomic_write_json, read_json
from bat.state.digest import sha256_path
from bat.state.jsonl import read_jsonl, write_jsonl
from bat.state.round_layout import ShardLayout, finished_shards


def write_reward_shard(directory: Path, rewards: Sequence[RewardRecord], meta: dict[str, Any]) -> Path:
    """Write rewards + DONE.json into `directory` atomically (the directory appears complete or not at all)."""
    with atomic_dir(directory) as tmp:
        shard = ShardLayout(tmp)
        write_jsonl(shard.rewards, rewards)
        valid = [r for r in rewards if r.valid]
        atomic_write_json(
            shard.done,
            {
                "rewards": len(rewards),
                "valid": len(valid),
                "reward_mean": (sum(r.reward for r in valid) / len(valid)) if valid else None,
                "invalid_reasons": dict(
                    Counter((r.invalid_reason or "").split(":")[0] for r in rewards if not r.valid)
                ),
                "rewards_sha256": sha256_path(shard.rewards),
                **meta,
            },
        )
    return directory


def read_reward_shard(directory: Path) -> list[RewardRecord]:
    """Rewards of one complete shard; raises if it has no DONE.json."""
    shard = ShardLayout(Path(directory))
    if not shard.is_done():
        raise FileNotFoundError(f"{directory}: reward shard is not complete (no {shard.done.name})")
    return read_jsonl(shard.rewards, RewardRecord)


def read_rewards(phase_dir: Path) -> list[RewardRecord]:
    """Every reward of every complete shard under a verify phase dir, in shard order."""
    return [r for shard in finished_shards(phase_dir) for r in read_reward_shard(shard.path)]


def reward_meta(directory: Path) -> dict[str, Any]:
    """The reward shard's DONE.json contents."""
    return read_json(ShardLayout(Path(directory)).done)
