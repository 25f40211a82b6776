"""The shuffled-reward twin (`grpo.shuffle_rewards`): the same rollouts trained with their rewards permuted across
each step's rollouts, so the reward's link to what a rollout did is cut while the reward distribution, group sizes,
budgets and every other knob stay identical. Whatever an arm gains beyond its twin is learning from the reward.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from bat.schemas.rollout import RewardRecord
from bat.seeds import derive_seed


def scored(rewards: Sequence[RewardRecord]) -> list[int]:
    """Indices of the records with a valid reward (the only ones that enter group statistics)."""
    return [i for i, r in enumerate(rewards) if r.valid and r.reward is not None]


def shuffled(rewards: Sequence[RewardRecord], seed: int) -> list[RewardRecord]:
    """`rewards` with the reward values of the valid records permuted among those records (seeded by `seed`);
    invalid records are left as they are (they never enter group statistics)."""
    valid = scored(rewards)
    values = [rewards[i].reward for i in valid]
    random.Random(seed).shuffle(values)
    out = list(rewards)
    for index, value in zip(valid, values):
        out[index] = rewards[index].model_copy(update={"reward": value})
    return out


def shuffled_by_batch(
    rewards: Sequence[RewardRecord], batches: Sequence[Sequence[str]], seed_of: Iterable[int]
) -> list[RewardRecord]:
    """The twin for a round whose steps train plan batches: rewards permuted within each batch's rollouts (a
    state belongs to the first batch that lists it), batch b seeded by the b-th of `seed_of`; a rollout of a state
    no batch lists keeps its reward."""
    batch_of: dict[str, int] = {}
    for index, batch in enumerate(batches):
        for state in batch:
            batch_of.setdefault(state, index)
    out = list(rewards)
    for index, seed in zip(range(len(batches)), seed_of):
        members = [i for i, r in enumerate(rewards) if batch_of.get(r.state_id) == index]
        for i, record in zip(members, shuffled([rewards[i] for i in members], seed)):
            out[i] = record
    return out


def twin_rewards(
    rewards: Sequence[RewardRecord], batches: Sequence[Sequence[str]] | None, seed: int
) -> list[RewardRecord]:
    """The twin's rewards for a round trained on its rollout phase: permuted within each plan batch (`batches`,
    what one step trains under `grpo.step_batches: plan`) or, without batches, across the whole round."""
    if batches is None:
        return shuffled(rewards, seed)
    return shuffled_by_batch(rewards, batches, (derive_seed(seed, "batch", b) for b in range(len(batches))))


def twin_seed(run_seed: int, round_index: int) -> int:
    """The seed of a round's permutation (the grpo phase's `ctx.seed("twin")`; `bat train grpo` derives the same from
    the plan's round)."""
    return derive_seed(run_seed, round_index, "grpo", "twin")
