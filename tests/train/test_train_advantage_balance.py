"""Net advantage weight of a GRPO step: what the loss aggregation leaves uncancelled within a group."""

from __future__ import annotations

import json

import pytest

from bat.state.jsonl import write_jsonl
from bat.state.markers import write_done
from bat.train.advantage_balance import main, net_weight, uncancelled
from bat.train.grpo_data import GrpoItem


def _item(state: str, adv: float, generated: int) -> GrpoItem:
    mask = [0] * 4 + [1] * generated
    ids = [1] * len(mask)
    return GrpoItem(f"{state}-{adv}-{generated}", state, "S-target", ids, mask, [0.0] * len(mask), 1.0, 0.0, adv)


def test_a_long_low_reward_member_pushes_a_group_down_under_token_mean_only() -> None:
    # seven short members above the group mean, one long member below it (advantages sum to zero)
    group = [_item("s", 0.378, 160) for _ in range(7)] + [_item("s", -2.646, 1238)]
    up, down = 7 * 0.378 * 160, 2.646 * 1238
    assert net_weight(group, "token-mean") == pytest.approx((up - down) / (up + down))
    assert net_weight(group, "token-mean") < -0.7
    assert net_weight(group, "seq-mean-token-mean") == pytest.approx(0.0, abs=1e-3)
    assert net_weight([], "token-mean") == 0.0 and net_weight([_item("z", 0.0, 9)], "seq-mean-token-mean") == 0.0
    # over a step: a second group that pushes up by as much leaves the step's sum at 0, not its groups' shares
    mirror = [_item("m", -0.378, 160) for _ in range(7)] + [_item("m", 2.646, 1238)]
    assert net_weight(group + mirror, "token-mean") == pytest.approx(0.0, abs=1e-9)
    assert uncancelled(group + mirror, "token-mean") == pytest.approx((down - up) / (up + down))
    assert uncancelled(group + mirror, "seq-mean-token-mean") == pytest.approx(0.0, abs=1e-3)
    with pytest.raises(ValueError, match="valid: \\['token-mean', 'seq-mean-token-mean'\\]"):
        net_weight(group, "sum")


def test_the_command_reads_a_rounds_shards_and_prints_each_groups_balance(tmp_path, capsys, record_factories) -> None:
    make_rollout, make_reward = record_factories
    lengths, rewards = [2, 2, 2, 8], [1.0, 1.0, 1.0, 0.0]
    rollouts = [
        make_rollout(f"g-k{k}", "g", [5] * (n + 1), [0] + [1] * n, [0.0] * (n + 1)) for k, n in enumerate(lengths)
    ]
    scored = [make_reward(f"g-k{k}", "g", r) for k, r in enumerate(rewards)]
    write_jsonl(tmp_path / "rollout" / "shard_0000" / "rollouts.jsonl", rollouts)
    write_jsonl(tmp_path / "verify" / "shard_0000" / "rewards.jsonl", scored)
    for phase in ("rollout", "verify"):  # both shards finished
        write_done(tmp_path / phase / "shard_0000", phase=phase, config_hash="h")
    assert main([str(tmp_path)]) == 0
    printed = json.loads(capsys.readouterr().out)
    [group] = printed["groups"]
    assert group["trained_tokens"] == lengths and group["rewards"] == rewards
    # advantages +1/sqrt(3) x3 and -sqrt(3): token weights 2, 2, 2 against 8
    assert group["net_weight"]["token-mean"] == pytest.approx((6 / 3**0.5 - 8 * 3**0.5) / (6 / 3**0.5 + 8 * 3**0.5))
    assert group["net_weight"]["seq-mean-token-mean"] == pytest.approx(0.0, abs=1e-6)
    assert printed["uncancelled"]["token-mean"] == pytest.approx(abs(group["net_weight"]["token-mean"]))


def test_the_command_names_a_round_without_shards_and_exits_2(tmp_path, capsys) -> None:
    assert main([str(tmp_path)]) == 2
    assert "no rollout/shard_*/rollouts.jsonl" in capsys.readouterr().err
