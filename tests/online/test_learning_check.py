"""The learning check: the real rollout -> verify -> GRPO path must teach a tiny task within a fixed number of steps,
and must not when the rewards are shuffled or the advantage's sign is flipped."""

from __future__ import annotations

import pytest

from bat.config.model import TinyModelConfig
from bat.online.learning_check import run_check

SMALL = TinyModelConfig(
    vocab_size=512, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=128, max_positions=512
)
STEPS = 30


def _head_tail(rewards: list[float]) -> tuple[float, float]:
    return sum(rewards[:3]) / 3, sum(rewards[-3:]) / 3


@pytest.fixture(scope="module")
def model(tiny_model_builder):
    return tiny_model_builder(SMALL, 0)


def test_reward_rises_from_below_02_to_above_08(model, tmp_path):
    rewards = run_check(model, tmp_path, steps=STEPS)
    head, tail = _head_tail(rewards)
    assert len(rewards) == STEPS
    assert head < 0.2, rewards
    assert tail > 0.8, rewards


def test_shuffled_rewards_do_not_rise(model, tmp_path):
    rewards = run_check(model, tmp_path, steps=STEPS, shuffle=True)
    head, tail = _head_tail(rewards)
    assert head < 0.2 and tail < 0.2, rewards


def test_a_flipped_advantage_fails_the_check(model, tmp_path, monkeypatch):
    """A sign bug in the advantage (here: every advantage negated) must keep the reward from rising."""
    import bat.train.losses as losses

    honest = losses.group_advantages
    monkeypatch.setattr(losses, "group_advantages", lambda *a, **kw: -honest(*a, **kw))
    rewards = run_check(model, tmp_path, steps=STEPS)
    assert max(rewards[-3:]) < 0.2, rewards


def test_an_interrupted_check_resumes_to_the_same_curve(model, tmp_path):
    """Stopped after 3 of 6 steps and run again, the block ends with the same per-step rewards and weights."""
    from bat.online.block import train_online
    from bat.online.learning_check import check_config, digits_source
    from bat.state.digest import sha256_path
    from bat.state.jsonl import read_jsonl

    def run(work, stops):
        source = digits_source(model, work, groups=2, k=4, max_new_tokens=8)
        cfg = check_config(6, lr=1e-2, shuffle=False, micro_batch=8).model_copy(
            update={"checkpoint_every": 1, "export_steps": (3,)}
        )
        for stop in stops:
            train_online(
                model,
                source,
                cfg,
                seed=3,
                round_index=1,
                root=work / "online",
                ckpt_root=work / "ckpt",
                export_dir=work / "export",
                metrics_path=work / "metrics.jsonl",
                stop_after=stop,
            )
        return [m["reward_mean"] for m in read_jsonl(work / "metrics.jsonl")], sha256_path(
            work / "export" / "model.safetensors"
        )

    whole = run(tmp_path / "whole", [None])
    resumed = run(tmp_path / "resumed", [3, None])
    assert whole == resumed
    from bat.state.online_layout import OnlineLayout

    assert (OnlineLayout(tmp_path / "whole" / "online").export(3) / "model.safetensors").is_file()
