"""Fixtures for the train tests: a small tiny model, synthetic teacher SFT rows, synthetic rollouts."""

from __future__ import annotations

import random

import pytest

from bat.config.model import TinyModelConfig
from bat.policy.codec import render_tool_call
from bat.schemas.bank import ChatMessage, LossMaskSpec, SftRow
from bat.schemas.rollout import RewardRecord, RolloutRecord, Segment, TurnRecord
from bat.schemas.routing import PlanRow, RoundPlan

TOOLS = ("list_files", "read_file", "run_python", "submit")
WORDS = ("cases", "data", "plan", "out", "model", "pilot", "preds", "report")
SMALL = TinyModelConfig(
    vocab_size=512, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=128, max_positions=512
)


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
        rows.append(
            SftRow(
                row_id=f"r{seed}-{index}",
                trajectory_id=f"t{seed}-{index // 2}",
                task_id=f"task{index}",
                track="classification",
                stage="S1",
                outcome="success",
                turn=0,
                messages=messages,
                target=target,
                loss_mask=LossMaskSpec(context_messages=2),
                length=40,
                length_unit="approx_tokens",
                split=split,
            )
        )
    return rows


def practice_bank_rows(run_dir, track: str) -> list[SftRow]:
    """Train SFT rows of a real practice bank synthesized under `run_dir`: one expert trajectory of `track`,
    in-process runtime, no validation split, no held-out material."""
    from bat.bank.synthesize import synthesize
    from bat.config import load_config
    from bat.state.layout import RunLayout

    cfg = load_config(
        None,
        [
            f"bank.tracks=[{track}]",
            "bank.tasks_per_track=1",
            "bank.e2e_per_track=0",
            "bank.outcomes=[success]",
            "benchmark.runtime=inprocess",
            "leakage.enabled=false",
            "bank.sft_max_length=100000",
            "bank.validation_fraction=0",
        ],
    )
    bank, _ = synthesize(cfg, RunLayout(run_dir))
    return bank.sft_rows("train")


@pytest.fixture(scope="session")
def bank_rows_of():
    """The factory `practice_bank_rows(run_dir, track)`."""
    return practice_bank_rows


@pytest.fixture(scope="session")
def tiny_dir(tiny_model_builder):
    return tiny_model_builder(SMALL, 7)


@pytest.fixture(scope="session")
def small_cfg():
    return SMALL


@pytest.fixture(scope="session")
def sft_rows():
    """The row factory `make_rows(count, seed, split)`."""
    return make_rows


def make_rollout(
    rollout_id, state_id, ids, mask, behavior, *, pool="S-target", valid=True, temperature=1.0, prompt_len=1
):
    """A minimal valid RolloutRecord around the given token arrays: one generated segment and one turn per
    contiguous run of mask 1s (as the rollout engine writes them); the runs of 0s are the prompt and observations."""
    segments, turns = [], []
    start = 0
    for end in range(1, len(mask) + 1):
        if end < len(mask) and mask[end] == mask[start]:
            continue
        kind = "generated" if mask[start] else ("prompt" if start == 0 else "observation")
        segments.append(Segment(kind=kind, start=start, end=end))
        if kind == "generated":
            turns.append(TurnRecord(index=len(turns), response_text="", generated_tokens=end - start, finish="stop"))
        start = end
    return RolloutRecord(
        rollout_id=rollout_id,
        state_id=state_id,
        round=1,
        shard=0,
        k=0,
        pool=pool,
        stage="S1",
        seed=0,
        engine="test",
        checkpoint="test",
        temperature=temperature,
        token_ids=list(ids),
        loss_mask=list(mask),
        behavior_logprobs=list(behavior),
        prompt_len=prompt_len,
        segments=segments,
        turns=turns,
        tool_calls=len(turns),
        response_tokens=sum(mask),
        end_reason="done" if valid else "error",
        valid=valid,
        invalid_reason=None if valid else "sandbox crashed",
    )


def make_reward(rollout_id, state_id, reward, *, pool="S-target", valid=True):
    return RewardRecord(
        rollout_id=rollout_id,
        state_id=state_id,
        round=1,
        pool=pool,
        stage="S1",
        items=[],
        reward=reward,
        valid=valid,
        invalid_reason=None if valid else "judge timeout",
        reward_version="test",
        judge="none",
    )


@pytest.fixture(scope="session")
def record_factories():
    return make_rollout, make_reward


def build_grpo_records(model_dir):
    """Rollouts over 4 learnable states (2 good + 2 bad two-turn responses each), 1 identical-reward state,
    1 invalid rollout and 1 invalid reward. Behavior log-probs come from the model itself (temperature 1)."""
    import torch

    from bat.policy.chat import encode_prompt, encode_text
    from bat.policy.loader import load_policy
    from bat.train.grpo import sequence_logprobs

    policy = load_policy(model_dir)
    tok = policy.tokenizer
    rng = random.Random(0)
    observation = encode_text(tok, "\n<|im_start|>tool\nexit status 0<|im_end|>\n<|im_start|>assistant\n")
    rollouts, rewards = [], []
    for s in range(6):
        tool, path = rng.choice(TOOLS), f"{rng.choice(WORDS)}/{rng.choice(WORDS)}.txt"
        prompt = encode_prompt(tok, [{"role": "user", "content": f"Use {tool} on {path}."}], tools=[])
        good = encode_text(tok, render_tool_call({"name": tool, "arguments": {"path": path}}) + "<|im_end|>")
        bad = encode_text(tok, "I am not sure what to do here.<|im_end|>")
        for k in range(4):
            response = good if (k < 2 or s == 4) else bad
            ids = prompt + response + observation + response
            mask = [0] * len(prompt) + [1] * len(response) + [0] * len(observation) + [1] * len(response)
            batch = {
                "input_ids": torch.tensor([ids]),
                "attention_mask": torch.ones(1, len(ids), dtype=torch.long),
                "temperature": torch.tensor([1.0]),
            }
            with torch.no_grad():
                logp = sequence_logprobs(policy.model, batch, "cpu")[0].tolist()
            behavior = [0.0] + [lp if m else 0.0 for lp, m in zip(logp, mask[1:])]
            rid = f"s{s}-k{k}"
            valid = not (s == 5 and k == 0)
            pool = "E2E" if s % 2 else "S-target"
            rollouts.append(
                make_rollout(rid, f"state{s}", ids, mask, behavior, pool=pool, valid=valid, prompt_len=len(prompt))
            )
            reward = 0.5 if s == 4 else (1.0 if k < 2 else 0.0)
            rewards.append(
                make_reward(
                    rid, f"state{s}", None if (s == 5 and k == 1) else reward, pool=pool, valid=not (s == 5 and k == 1)
                )
            )
    return rollouts, rewards


@pytest.fixture(scope="session")
def grpo_records(tiny_dir):
    return build_grpo_records(tiny_dir)


def grpo_plan(start: str, batches: list[list[str]]) -> RoundPlan:
    """A round-1 plan over the `grpo_records` states (a state's pool as there: odd states E2E, even S-target)."""
    rows = [
        [
            PlanRow(state_id=s, pool="E2E", stage="E2E")
            if int(s.removeprefix("state")) % 2
            else PlanRow(state_id=s, pool="S-target", stage="S1")
            for s in batch
        ]
        for batch in batches
    ]
    mixture: dict[str, int] = {}
    for row in rows[0]:
        mixture[row.pool] = mixture.get(row.pool, 0) + 1
    return RoundPlan(
        round=1,
        arm="bicurl",
        target_stage="S1",
        mixture=mixture,
        reward_mode="rubric",
        bank_version=1,
        start_checkpoint=start,
        seed=1,
        batches=rows,
    )


@pytest.fixture(scope="session")
def make_grpo_plan():
    """`grpo_plan(start, batches)` as a fixture."""
    return grpo_plan
