"""Fixtures for the train tests: a small tiny model, synthetic teacher SFT rows, synthetic rollouts."""

from __future__ import annotations

import random

import pytest

from bat.policy.codec import render_tool_call
from bat.config.model import TinyModelConfig
from bat.schemas.bank import ChatMessage, LossMaskSpec, SftRow
from bat.schemas.rollout import RewardRecord, RolloutRecord, TurnRecord

TOOLS = ("list_files", "read_file", "run_python", "submit")
WORDS = ("cases", "data", "plan", "out", "model", "pilot", "preds", "report")
SMALL = TinyModelConfig(vocab_size=512, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2,
                        intermediate_size=128, max_positions=512)


def make_rows(count: int, seed: int, split: str = "train") -> list[SftRow]:
    """`count` rows: the user names a tool and a path; the target is that exact tool call."""
    rng = random.Random(seed)
    rows = []
    for index in range(count):
        tool = rng.choice(TOOLS)
        path = f"{rng.choice(WORDS)}/{rng.choice(WORDS)}.txt"
        messages = [
            ChatMessage(role="system", content="You are a careful agent. Answer with one tool call."),
            ChatMessage(role="user", content=f"Use {tool} on {path}."),
        ]
        target = render_tool_call({"name": tool, "arguments": {"path": path}})
        rows.append(SftRow(row_id=f"r{seed}-{index}", trajectory_id=f"t{seed}-{index // 2}", task_id=f"task{index}",
                           track="classification", stage="S1", outcome="success", turn=0, messages=messages,
                           target=target, loss_mask=LossMaskSpec(context_messages=2), length=40,
                           length_unit="approx_tokens", split=split))
    return rows


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    from bat.policy.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", SMALL, seed=7)


@pytest.fixture(scope="session")
def sft_rows():
    """The row factory `make_rows(count, seed, split)`."""
    return make_rows


def make_rollout(rollout_id, state_id, ids, mask, behavior, *, pool="S-target", valid=True, temperature=1.0, prompt_len=1):
    """A minimal valid RolloutRecord around the given token arrays."""
    return RolloutRecord(
        rollout_id=rollout_id, state_id=state_id, round=1, shard=0, k=0, pool=pool, stage="S1", seed=0, engine="test",
        checkpoint="test", temperature=temperature, token_ids=list(ids), loss_mask=list(mask),
        behavior_logprobs=list(behavior), prompt_len=prompt_len, segments=[],
        turns=[TurnRecord(index=0, response_text="", generated_tokens=sum(mask), finish="stop")], tool_calls=1,
        response_tokens=sum(mask), end_reason="done" if valid else "error", valid=valid,
        invalid_reason=None if valid else "sandbox crashed")


def make_reward(rollout_id, state_id, reward, *, pool="S-target", valid=True):
    return RewardRecord(rollout_id=rollout_id, state_id=state_id, round=1, pool=pool, stage="S1", items=[],
                        reward=reward, valid=valid, invalid_reason=None if valid else "judge timeout",
                        reward_version="test", judge="none")


@pytest.fixture(scope="session")
def record_factories():
    return make_rollout, make_reward
