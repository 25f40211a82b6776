"""Join rollout and reward shards into GRPO training items with group-normalised advantages (Eq. 4).

A rollout joins its group's statistics only if the rollout is valid and its reward record exists, is
valid and carries a reward (infrastructure failures are excluded, never counted as reward 0). Groups
are `state_id` only. Rollouts longer than `max_seq_len` or without generated tokens still count in
their group's statistics but are not trained on. Under `grpo.stage_row_credit: own-stage` a stage row's turns
that the environment tagged with a later stage than the row's are left out of its loss mask (`own_stage_mask`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.schemas.rollout import RewardRecord, RolloutRecord
from bat.state.jsonl import read_jsonl

if TYPE_CHECKING:
    from bat.config.root import BatConfig


@dataclass(frozen=True)
class GrpoItem:
    """One trainable rollout: tokens, generated-token mask, behavior log-probs, advantage, provenance."""

    rollout_id: str
    state_id: str
    pool: str
    ids: list[int]
    mask: list[int]
    behavior: list[float]
    temperature: float
    reward: float
    adv: float


@dataclass
class GrpoData:
    items: list[GrpoItem]
    counts: dict[str, int] = field(default_factory=dict)


def read_records(paths: Iterable[str | Path], model: type) -> list[Any]:
    """All records of `model` from the given JSONL files, in order."""
    out: list[Any] = []
    for path in paths:
        out.extend(read_jsonl(path, model))
    return out


def _exclusion(rollout: RolloutRecord, reward: RewardRecord | None) -> str | None:
    if not rollout.valid:
        return "excluded_invalid_rollout"
    if reward is None:
        return "excluded_missing_reward"
    if not reward.valid or reward.reward is None:
        return "excluded_invalid_reward"
    if reward.state_id != rollout.state_id:
        raise ValueError(
            f"reward for {rollout.rollout_id} names state {reward.state_id}, rollout has {rollout.state_id}"
        )
    return None


def credited_stage_order(cfg: BatConfig) -> tuple[str, ...] | None:
    """`build_items`'s `own_stage_order` under `cfg`: the benchmark's stage keys when `grpo.stage_row_credit` is
    `own-stage`, else None (every turn trained)."""
    return cfg.stage_keys if cfg.grpo.stage_row_credit == "own-stage" else None


def grpo_data(
    cfg: BatConfig,
    rollout_files: Iterable[str | Path],
    reward_files: Iterable[str | Path],
    *,
    batches: Sequence[Sequence[str]] | None = None,
    twin_seed: int = 0,
) -> GrpoData:
    """The items a GRPO block trains on under `cfg`: the given rollout and reward JSONL files through `build_items`
    with `grpo.max_seq_len`, `grpo.normalize_std`, `grpo.adv_eps` and the credited stage order; under
    `grpo.shuffle_rewards` (the twin) the rewards are first permuted within each of the plan's `batches` (what one
    step trains with `step_batches: plan`; across the round otherwise), seeded by `twin_seed`. The one preparation
    the grpo phase and `bat train grpo` share."""
    from bat.train.twin import twin_rewards

    rewards = read_records(reward_files, RewardRecord)
    if cfg.grpo.shuffle_rewards:
        rewards = twin_rewards(rewards, batches if cfg.grpo.step_batches == "plan" else None, twin_seed)
    return build_items(
        read_records(rollout_files, RolloutRecord),
        rewards,
        max_seq_len=cfg.grpo.max_seq_len,
        normalize_std=cfg.grpo.normalize_std,
        adv_eps=cfg.grpo.adv_eps,
        own_stage_order=credited_stage_order(cfg),
    )


def own_stage_mask(rollout: RolloutRecord, stage_order: Sequence[str]) -> tuple[list[int], int]:
    """`rollout.loss_mask` with the generated tokens of every turn the environment tagged with a stage after the
    row's own stage set to 0, and how many turns that cleared: a later stage's tool, or any call (malformed ones
    too, `bat.benchmark.env`: they take the current stage) once the episode has moved on to a later stage. Turns map
    in order onto the generated segments (a turn that generated no token has none). E2E rows (and any row whose
    stage is not in `stage_order`) and turns without an execution record keep their mask."""
    mask = list(rollout.loss_mask)
    if rollout.stage not in stage_order:
        return mask, 0
    own = stage_order.index(rollout.stage)
    spans = iter(s for s in rollout.segments if s.kind == "generated")
    cleared = 0
    for turn in rollout.turns:
        if turn.generated_tokens == 0:  # an empty turn has no segment
            continue
        span = next(spans, None)
        if span is None or span.end - span.start != turn.generated_tokens:
            raise ValueError(
                f"rollout {rollout.rollout_id}: turn {turn.index}'s {turn.generated_tokens} generated tokens have no "
                "generated segment of that length (segments and turns out of step)"
            )
        stage = (turn.record or {}).get("stage")
        if stage in stage_order and stage_order.index(stage) > own:
            mask[span.start : span.end] = [0] * (span.end - span.start)
            cleared += 1
    return mask, cleared


def build_items(
    rollouts: Sequence[RolloutRecord],
    rewards: Sequence[RewardRecord],
    *,
    max_seq_len: int,
    normalize_std: bool,
    adv_eps: float,
    own_stage_order: Sequence[str] | None = None,
) -> GrpoData:
    """Join by rollout_id, compute advantages within each state_id group, drop untrainable rollouts (counted).

    `own_stage_order` (the benchmark's stage keys, given under `grpo.stage_row_credit: own-stage`): train a stage
    row only on the turns of its own and earlier stages (`own_stage_mask`; count `stage_turns_uncredited`). None
    trains every generated turn."""
    import torch

    from bat.train.losses import group_advantages

    by_id = {r.rollout_id: r for r in rewards}
    counts: Counter[str] = Counter(rollouts=len(rollouts), rewards=len(rewards))
    usable: list[tuple[RolloutRecord, float]] = []
    for rollout in rollouts:
        reason = _exclusion(rollout, by_id.get(rollout.rollout_id))
        if reason:
            counts[reason] += 1
        else:
            usable.append((rollout, float(by_id[rollout.rollout_id].reward)))  # type: ignore[arg-type]
    if not usable:
        return GrpoData(items=[], counts=dict(counts))
    adv = group_advantages(
        torch.tensor([r for _, r in usable]),
        [ro.state_id for ro, _ in usable],
        normalize_std=normalize_std,
        eps=adv_eps,
    ).tolist()
    items: list[GrpoItem] = []
    groups: dict[str, list[float]] = {}
    for (rollout, reward), a in zip(usable, adv):
        groups.setdefault(rollout.state_id, []).append(reward)
        if len(rollout.token_ids) > max_seq_len:
            counts["excluded_overlong"] += 1
            continue
        mask = list(rollout.loss_mask)
        if own_stage_order is not None:
            mask, cleared = own_stage_mask(rollout, own_stage_order)
            counts["stage_turns_uncredited"] += cleared
        if sum(mask[1:]) == 0:
            counts["excluded_no_generated_tokens"] += 1
            continue
        items.append(
            GrpoItem(
                rollout.rollout_id,
                rollout.state_id,
                rollout.pool,
                list(rollout.token_ids),
                mask,
                list(rollout.behavior_logprobs),
                rollout.temperature,
                reward,
                a,
            )
        )
    counts["groups"] = len(groups)
    counts["groups_identical_rewards"] = sum(1 for v in groups.values() if max(v) == min(v))
    counts["trainable"] = len(items)
    return GrpoData(items=items, counts=dict(counts))


def collate_items(items: Sequence[GrpoItem], pad_id: int) -> dict[str, Any]:
    """Right-padded ids/attention plus shifted `[B, T-1]` mask and behavior log-probs, `[B]` adv and temperature,
    and `shared_prefix`: the untrained tokens every row starts with (`bat.train.shared_prefix`)."""
    import torch

    from bat.train.shared_prefix import shared_prefix_length

    width = max(len(i.ids) for i in items)
    shape = (len(items), width)
    ids = torch.full(shape, pad_id, dtype=torch.long)
    attn = torch.zeros(shape, dtype=torch.long)
    mask = torch.zeros(shape, dtype=torch.long)
    behavior = torch.zeros(shape, dtype=torch.float32)
    for row, item in enumerate(items):
        n = len(item.ids)
        ids[row, :n] = torch.tensor(item.ids)
        attn[row, :n] = 1
        mask[row, :n] = torch.tensor(item.mask)
        behavior[row, :n] = torch.tensor(item.behavior, dtype=torch.float32)
    return {
        "input_ids": ids,
        "attention_mask": attn,
        "loss_mask": mask[:, 1:],
        "behavior_logprobs": behavior[:, 1:],
        "adv": torch.tensor([i.adv for i in items], dtype=torch.float32),
        "temperature": torch.tensor([i.temperature for i in items], dtype=torch.float32),
        "shared_prefix": shared_prefix_length([i.ids for i in items], [i.mask for i in items]),
    }


def global_denominator(items: Sequence[GrpoItem], mode: str) -> int:
    """Denominator of the loss aggregation over a whole minibatch (tokens, or sequences with tokens)."""
    if mode == "token-mean":
        return sum(sum(i.mask[1:]) for i in items)
    return sum(1 for i in items if sum(i.mask[1:]) > 0)


def pool_reward_means(items: Sequence[GrpoItem]) -> dict[str, float]:
    """Mean reward per pool over `items`."""
    sums: dict[str, list[float]] = {}
    for item in items:
        sums.setdefault(item.pool, []).append(item.reward)
    return {pool: sum(v) / len(v) for pool, v in sorted(sums.items())}
