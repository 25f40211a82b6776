"""How much of a GRPO step's advantage weight cancels within its groups, under each loss aggregation.

Every generated token of rollout i carries its rollout's advantage A_i (Eq. 4); the loss aggregation gives the
rollout a total weight w_i: its generated-token count T_i under `token-mean`, 1 under `seq-mean-token-mean` (Eq. 19:
each rollout's token mean, then the mean over rollouts). Tokens that every member of a group writes alike (the
tool-call syntax) are pushed by sum_i A_i w_i. Group-centred advantages sum to zero, so under Eq. 19 that push is
zero; under `token-mean` a group whose low-reward members are long pushes those shared tokens down.

`net_weight(items, mode)` = sum_i A_i w_i / sum_i |A_i| w_i in [-1, 1] over one group's members: 0 when its
advantage weight cancels, -1 when all of it pushes down. `uncancelled(items, mode)` = sum_g |sum_{i in g} A_i w_i| /
sum_i |A_i| w_i in [0, 1] over a step's groups: the share of the step's advantage weight that does not cancel within
its groups (each GRPO step logs it as `adv_uncancelled`). Both read the items only and write nothing.
`python -m bat.train.advantage_balance ROUND_DIR` prints, for a finished round's rollout and verify shards, each
group's net weight and the round's uncancelled share under both aggregations as one JSON object, with the masks and
advantages the round's GRPO step trained on: the run's own config (`<run>/run.json`, next to the round folder) says
the advantage normalisation and `grpo.stage_row_credit` (defaults when the run has none).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bat.train.grpo_data import GrpoItem
from bat.train.losses import AGG_MODES


def _weight(item: GrpoItem, mode: str) -> float:
    tokens = sum(item.mask[1:])
    if mode == "token-mean":
        return float(tokens)
    if mode == "seq-mean-token-mean":
        return 1.0 if tokens else 0.0
    raise ValueError(f"unknown loss aggregation {mode!r}; valid: {list(AGG_MODES)}")


def _group_sums(items: Sequence[GrpoItem], mode: str) -> tuple[dict[str, float], float]:
    """(sum_i A_i w_i per state_id group, sum_i |A_i| w_i over all `items`)."""
    groups: dict[str, float] = {}
    total = 0.0
    for item in items:
        weight = _weight(item, mode)
        groups[item.state_id] = groups.get(item.state_id, 0.0) + item.adv * weight
        total += abs(item.adv) * weight
    return groups, total


def net_weight(items: Sequence[GrpoItem], mode: str) -> float:
    """sum_i A_i w_i / sum_i |A_i| w_i over `items` (0.0 when no item carries advantage)."""
    groups, total = _group_sums(items, mode)
    return sum(groups.values()) / total if total else 0.0


def uncancelled(items: Sequence[GrpoItem], mode: str) -> float:
    """sum over groups of |sum_i A_i w_i| / sum_i |A_i| w_i over `items` (0.0 when no item carries advantage)."""
    groups, total = _group_sums(items, mode)
    return sum(abs(v) for v in groups.values()) / total if total else 0.0


def round_balance(
    round_dir: Path,
    *,
    normalize_std: bool = True,
    adv_eps: float = 1e-6,
    own_stage_order: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Per group (state_id, pool, rewards, trained tokens) its net weight, and over the round the uncancelled
    share, under each aggregation, from `round_dir`'s finished rollout and verify shards (the shards and advantages
    the GRPO phase trains on; no length cut; `own_stage_order` as in `build_items`: a stage row's turns of later
    stages left out). Raises FileNotFoundError when the round has no finished rollout or reward shard."""
    from bat.schemas.rollout import RewardRecord, RolloutRecord
    from bat.state.round_layout import all_shards, finished_shard_files
    from bat.train.grpo_data import build_items, read_records

    rollouts, _ = finished_shard_files(all_shards(Path(round_dir) / "rollout"), lambda s: s.rollouts)
    rewards, _ = finished_shard_files(all_shards(Path(round_dir) / "verify"), lambda s: s.rewards)
    if not rollouts or not rewards:
        raise FileNotFoundError(
            f"{round_dir}: no rollout/shard_*/rollouts.jsonl or verify/shard_*/rewards.jsonl of a finished shard "
            "(one with its DONE.json)"
        )
    data = build_items(
        read_records(rollouts, RolloutRecord),
        read_records(rewards, RewardRecord),
        max_seq_len=10**9,
        normalize_std=normalize_std,
        adv_eps=adv_eps,
        own_stage_order=own_stage_order,
    )
    groups: dict[str, list[GrpoItem]] = {}
    for item in data.items:
        groups.setdefault(item.state_id, []).append(item)
    return {
        "round_dir": str(round_dir),
        "stage_turns_uncredited": data.counts.get("stage_turns_uncredited", 0),
        "uncancelled": {mode: uncancelled(data.items, mode) for mode in AGG_MODES},
        "groups": [
            {
                "state_id": sid,
                "pool": members[0].pool,
                "rewards": [round(i.reward, 3) for i in members],
                "trained_tokens": [sum(i.mask[1:]) for i in members],
                "net_weight": {mode: net_weight(members, mode) for mode in AGG_MODES},
            }
            for sid, members in groups.items()
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bat.train.advantage_balance", description=__doc__.splitlines()[0])
    parser.add_argument("round_dir", type=Path, help="a round folder (round_NN) with finished rollout and verify")
    args = parser.parse_args(argv)
    from bat.config.load import ConfigError
    from bat.config.run_record import config_of_run
    from bat.state.errors import StateFileError
    from bat.state.layout import RunLayout
    from bat.train.grpo_data import credited_stage_order

    run = RunLayout(Path(args.round_dir).parent)
    try:
        cfg = config_of_run(str(run.root), None, [])
        balance = round_balance(
            args.round_dir,
            normalize_std=cfg.grpo.normalize_std,
            adv_eps=cfg.grpo.adv_eps,
            own_stage_order=credited_stage_order(cfg),
        )
    except (FileNotFoundError, ConfigError, StateFileError) as exc:
        print(f"advantage_balance: {exc}", file=sys.stderr)
        return 2
    balance["config"] = str(run.run_json) if run.run_json.exists() else "defaults (no run.json next to the round)"
    balance["stage_row_credit"] = cfg.grpo.stage_row_credit
    print(json.dumps(balance, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
