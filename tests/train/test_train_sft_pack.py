"""Prefix-sharing packing of SFT rows: exact merges only, same per-token losses and gradients as unpacked rows."""

from __future__ import annotations

import pytest
import torch

from bat.train.sft_data import Example, collate, encode_rows, prepare_sft
from bat.train.sft_pack import pack_prefixes


@pytest.fixture(scope="module")
def bank_rows(tmp_path_factory, bank_rows_of):
    """SFT rows of a real practice bank (one vqa expert trajectory, in-process runtime, no held-out material)."""
    return bank_rows_of(tmp_path_factory.mktemp("bank") / "run", "vqa")


def test_only_exact_prefixes_of_one_group_merge():
    a = Example([1, 2, 3, 4], [0, 0, 1, 1], "t1")
    b = Example([1, 2, 3, 4, 5, 6, 7, 8], [0, 0, 0, 0, 0, 0, 1, 1], "t1")  # a is a prefix of b's context
    c = Example([1, 2, 9, 4, 5], [0, 0, 0, 1, 1], "t1")  # differs at token 2: stays apart
    d = Example([1, 2, 3, 4], [0, 0, 1, 1], "t2")  # same ids, other trajectory
    dup = Example([1, 2, 3, 4, 5, 6, 7, 8], [0, 0, 0, 0, 0, 0, 1, 1], "t1")  # same targets as b: no overlap
    packed, counts = pack_prefixes([a, b, c, d, dup])
    assert counts == {"rows": 5, "sequences": 4, "target_tokens": 10, "tokens_unpacked": 29, "tokens_packed": 25}
    by_rows = sorted((e.group, e.rows, e.ids, e.mask) for e in packed)
    assert by_rows == [
        ("t1", 1, [1, 2, 3, 4, 5, 6, 7, 8], [0, 0, 0, 0, 0, 0, 1, 1]),
        ("t1", 1, [1, 2, 9, 4, 5], [0, 0, 0, 1, 1]),
        ("t1", 2, [1, 2, 3, 4, 5, 6, 7, 8], [0, 0, 1, 1, 0, 0, 1, 1]),
        ("t2", 1, [1, 2, 3, 4], [0, 0, 1, 1]),
    ]
    assert pack_prefixes([a, b, c, d, dup])[0] == packed, "deterministic for one input order"


def test_bank_rows_pack_per_trajectory_and_opening(bank_rows, tiny_dir):
    from bat.policy.loader import load_tokenizer

    tok = load_tokenizer(tiny_dir)
    data = prepare_sft(bank_rows, [], tok, 100_000, tools=[], pack=True)
    plain = prepare_sft(bank_rows, [], tok, 100_000, tools=[], pack=False)
    chains = {(r.trajectory_id, r.messages[0].content) for r in bank_rows}  # agent context: one per trajectory
    assert len(chains) == len({r.trajectory_id for r in bank_rows})
    counts = data.counts
    assert counts["train_rows"] == len(bank_rows) and counts["train_sequences"] == len(chains) < len(bank_rows)
    assert counts["train_target_tokens"] == plain.counts["train_target_tokens"] > 0
    assert counts["train_tokens"] < counts["train_tokens_unpacked"] == plain.counts["train_tokens"]
    assert sum(e.rows for e in data.train) == len(bank_rows)
    # every packed sequence is one real row's ids (so never longer than the row limit)
    assert all(any(e.ids == p.ids for p in plain.train) for e in data.train)


def test_packed_loss_and_gradients_equal_unpacked(bank_rows, tiny_dir):
    from transformers import AutoModelForCausalLM, Qwen3Config

    from bat.policy.loader import load_tokenizer
    from bat.train.sft import _nll_sum

    tok = load_tokenizer(tiny_dir)
    limit = 4000  # rows above it are rejected row by row; the shortest chain (first stage) stays
    rows, counts = encode_rows(bank_rows, tok, limit, tools=[])
    assert counts["rejected_overlong"] > 0 and len(rows) >= 2
    packed, pack_counts = pack_prefixes(rows)
    assert len(packed) < len(rows) and pack_counts["rows"] == len(rows)
    config = Qwen3Config(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=limit,
    )
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)

    def loss_and_grads(examples: list[Example]) -> tuple[float, list[torch.Tensor]]:
        """Token-mean NLL over every target of `examples` (micro-batches of 2, right-padded) and its gradients."""
        model.zero_grad()
        parts = [_nll_sum(model, collate(examples[k : k + 2], tok.pad_token_id)) for k in range(0, len(examples), 2)]
        loss = sum(nll for nll, _ in parts) / sum(count for _, count in parts)
        loss.backward()
        return float(loss.detach()), [p.grad.clone() for p in model.parameters()]

    loss_rows, grads_rows = loss_and_grads(rows)
    loss_packed, grads_packed = loss_and_grads(packed)
    assert loss_packed == pytest.approx(loss_rows, rel=1e-5)
    for g_rows, g_packed in zip(grads_rows, grads_packed):
        torch.testing.assert_close(g_packed, g_rows, rtol=1e-4, atol=1e-6)


def _two_turn_rows(trajectories: int) -> list:
    """Two rows per trajectory: row 2's context = row 1's context + row 1's target + the tool's observation."""
    from bat.policy.codec import render_tool_call
    from bat.schemas.bank import ChatMessage, LossMaskSpec, SftRow

    rows = []
    for k in range(trajectories):
        first, second = (
            render_tool_call({"name": name, "arguments": {"path": f"cases/c{k}.txt"}})
            for name in ("read_file", "submit")
        )
        context = [
            ChatMessage(role="system", content="You are a careful agent."),
            ChatMessage(role="user", content=f"Read case {k}, then submit."),
        ]
        later = [
            *context,
            ChatMessage(role="assistant", content=first),
            ChatMessage(role="tool", content=f"case {k}: ok", name="read_file"),
        ]
        for turn, (messages, target) in enumerate(((context, first), (later, second))):
            rows.append(
                SftRow(
                    row_id=f"t{k}.{turn}",
                    trajectory_id=f"t{k}",
                    task_id=f"task{k}",
                    track="vqa",
                    stage="S1",
                    outcome="success",
                    turn=turn,
                    messages=messages,
                    target=target,
                    loss_mask=LossMaskSpec(context_messages=len(messages)),
                    length=80,
                    length_unit="approx_tokens",
                    split="train",
                )
            )
    return rows


def test_first_deepspeed_step_sees_the_same_loss_packed_or_not(tiny_dir, tmp_path):
    from bat.config.deepspeed import DeepSpeedConfig
    from bat.config.sft import SftConfig
    from bat.policy.loader import load_tokenizer
    from bat.state.jsonl import read_jsonl
    from bat.train.sft import train_sft

    tok = load_tokenizer(tiny_dir)
    rows = _two_turn_rows(4)
    first_steps = {}
    for pack, batch in ((False, 8), (True, 4)):
        data = prepare_sft(rows, [], tok, 256, tools=[], pack=pack)
        assert data.counts["train_sequences"] == batch and data.counts["train_rows"] == 8
        cfg = SftConfig(steps=1, lr=1e-3, global_batch=batch, deepspeed=DeepSpeedConfig(micro_batch_per_rank=4))
        train_sft(
            tiny_dir,
            data,
            cfg,
            seed=0,
            ckpt_root=tmp_path / f"ck{pack}",
            export_dir=tmp_path / f"hf{pack}",
            metrics_path=tmp_path / f"m{pack}.jsonl",
        )
        first_steps[pack] = read_jsonl(tmp_path / f"m{pack}.jsonl")[0]
    plain, packed = first_steps[False], first_steps[True]
    assert (packed["rows"], packed["sequences"], plain["rows"], plain["sequences"]) == (8, 4, 8, 8)
    assert packed["target_tokens"] == plain["target_tokens"] and packed["tokens"] < plain["tokens"]
    assert packed["loss"] == pytest.approx(plain["loss"], rel=1e-5)
    assert packed["grad_norm"] == pytest.approx(plain["grad_norm"], rel=1e-4)
