"""Reward shards: `verify/shard_NNNN/{rewards.jsonl, DONE.json}`, one per rollout shard, written whole."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from bat.schemas.rollout import RewardRecord
from bat.state.atomic import atomic_dir, atomic_write_json, read_json
from bat.state.digest import sha256_path
from bat.state.jsonl import read_jsonl, write_jsonl

REWARDS = "rewards.jsonl"
DONE = "DONE.json"


def write_reward_shard(directory: Path, rewards: Sequence[RewardRecord], meta: dict[str, Any]) -> Path:
    """Write rewards + DONE.json into `directory` atomically (the directory appears complete or not at all)."""
    with atomic_dir(directory) as tmp:
        write_jsonl(tmp / REWARDS, rewards)
        valid = [r for r in rewards if r.valid]
        atomic_write_json(tmp / DONE, {
            "rewards": len(rewards), "valid": len(valid),
            "reward_mean": (sum(r.reward for r in valid) / len(valid)) if valid else None,
            "invalid_reasons": dict(Counter((r.invalid_reason or "").split(":")[0] for r in rewards if not r.valid)),
            "rewards_sha256": sha256_path(tmp / REWARDS), **meta})
    return directory


def read_reward_shard(directory: Path) -> list[RewardRecord]:
    """Rewards of one complete shard; raises if it has no DONE.json."""
    if not (Path(directory) / DONE).is_file():
        raise FileNotFoundError(f"{directory}: reward shard is not complete (no {DONE})")
    return read_jsonl(Path(directory) / REWARDS, RewardRecord)


def read_rewards(phase_dir: Path) -> list[RewardRecord]:
    """Every reward of every complete shard under a verify phase dir, in shard order."""
    shards = sorted(p for p in Path(phase_dir).glob("shard_[0-9][0-9][0-9][0-9]") if (p / DONE).is_file())
    return [r for d in shards for r in read_reward_shard(d)]


def reward_meta(directory: Path) -> dict[str, Any]:
    """The reward shard's DONE.json contents."""
    return read_json(Path(directory) / DONE)
