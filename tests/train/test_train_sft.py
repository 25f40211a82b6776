"""SFT cold start: learns teacher tool calls, resumes exactly, reports overlong rows."""

from __future__ import annotations

import pytest
import torch

from bat.benchmark.prompts import to_dicts
from bat.config.deepspeed import DeepSpeedConfig
from bat.config.sft import SftConfig
from bat.policy.chat import encode_prompt
from bat.policy.codec import ToolCall, parse_tool_call
from bat.policy.loader import load_model, load_policy, load_tokenizer
from bat.state.checkpoints import CheckpointStore
from bat.state.jsonl import read_jsonl
from bat.train.sft import train_sft
from bat.train.sft_data import encode_rows, prepare_sft


def _cfg(steps: int, **kw) -> SftConfig:
    base = dict(
        steps=steps,
        lr=3e-3,
        warmup_ratio=0.1,
        global_batch=16,
        val_every=20,
        checkpoint_every=100,
        keep_checkpoints=2,
        deepspeed=DeepSpeedConfig(micro_batch_per_rank=8),
    )
    return SftConfig(**(base | kw))


def _weights(path):
    return {k: v.clone() for k, v in load_model(path).state_dict().items()}


@pytest.mark.slow
def test_sft_lowers_validation_loss_and_emits_parseable_tool_calls(tiny_dir, sft_rows, tmp_path):
    tok = load_tokenizer(tiny_dir)
    data = prepare_sft(sft_rows(64, 1), sft_rows(16, 2, "validation"), tok, 256, tools=[])
    out = train_sft(
        tiny_dir,
        data,
        _cfg(100, deepspeed=DeepSpeedConfig(micro_batch_per_rank=16)),
        seed=3,
        ckpt_root=tmp_path / "ck",
        export_dir=tmp_path / "hf",
        metrics_path=tmp_path / "metrics.jsonl",
    )
    assert out["done"] and out["step"] == 100
    assert out["val_loss"] < 0.5 * out["first_val_loss"]
    metrics = read_jsonl(tmp_path / "metrics.jsonl")
    assert [m["step"] for m in metrics if "loss" in m] == list(range(1, 101))
    assert all(m["grad_norm"] > 0 and m["tokens"] > 0 for m in metrics if "loss" in m)
    assert CheckpointStore(tmp_path / "ck").valid_steps() == [100]
    policy = load_policy(tmp_path / "hf")
    held_out = sft_rows(8, 99, "validation")
    parsed = []
    for row in held_out:
        ids = encode_prompt(policy.tokenizer, to_dicts(row.messages))
        gen = policy.model.generate(torch.tensor([ids]), max_new_tokens=40, do_sample=False)
        text = policy.tokenizer.decode(gen[0, len(ids) :], skip_special_tokens=True)
        parsed.append(parse_tool_call(text))
    assert sum(isinstance(p, ToolCall) for p in parsed) >= 6, parsed


def test_resume_equals_uninterrupted_training(tiny_dir, sft_rows, tmp_path):
    tok = load_tokenizer(tiny_dir)
    data = prepare_sft(sft_rows(24, 5), [], tok, 256, tools=[])
    cfg = _cfg(6, global_batch=8, checkpoint_every=2, deepspeed=DeepSpeedConfig(micro_batch_per_rank=4))
    train_sft(
        tiny_dir,
        data,
        cfg,
        seed=11,
        ckpt_root=tmp_path / "a",
        export_dir=tmp_path / "a_hf",
        metrics_path=tmp_path / "a.jsonl",
    )
    first = train_sft(
        tiny_dir,
        data,
        cfg,
        seed=11,
        ckpt_root=tmp_path / "b",
        export_dir=tmp_path / "b_hf",
        metrics_path=tmp_path / "b.jsonl",
        stop_after=3,
    )
    assert not first["done"] and not (tmp_path / "b_hf").exists()
    assert CheckpointStore(tmp_path / "b").valid_steps() == [2, 3]
    second = train_sft(
        tiny_dir,
        data,
        cfg,
        seed=11,
        ckpt_root=tmp_path / "b",
        export_dir=tmp_path / "b_hf",
        metrics_path=tmp_path / "b.jsonl",
    )
    assert second["done"] and second["step"] == 6
    a, b = _weights(tmp_path / "a_hf"), _weights(tmp_path / "b_hf")
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-5, atol=1e-6, msg=name)
    losses_a = [m["loss"] for m in read_jsonl(tmp_path / "a.jsonl") if "loss" in m]
    losses_b = [m["loss"] for m in read_jsonl(tmp_path / "b.jsonl") if "loss" in m]
    assert losses_a == pytest.approx(losses_b, rel=1e-5)
    assert CheckpointStore(tmp_path / "b").valid_steps() == [4, 6]


def test_overlong_rows_are_rejected_and_counted(tiny_dir, sft_rows):
    tok = load_tokenizer(tiny_dir)
    rows = sft_rows(10, 4)
    lengths = sorted(len(e.ids) for e in encode_rows(rows, tok, 10_000, tools=[])[0])
    limit = lengths[4]
    assert lengths[-1] > limit
    data = prepare_sft(rows, rows[:2], tok, limit, tools=[])
    assert data.counts["train_rows"] == 10
    assert data.counts["train_rejected_overlong"] + data.counts["train_kept"] == 10
    assert data.counts["train_rejected_overlong"] > 0
    assert all(len(e.ids) <= limit for e in data.train)
    with pytest.raises(ValueError, match="no SFT training rows left"):
        prepare_sft(rows, [], tok, 20, tools=[])


def test_batch_shape_errors_list_valid_values(tiny_dir, sft_rows, tmp_path):
    data = prepare_sft(sft_rows(8, 1), [], load_tokenizer(tiny_dir), 256, tools=[])
    with pytest.raises(ValueError, match=r"valid values include \[4, 8, 12, 16\]"):
        train_sft(
            tiny_dir,
            data,
            _cfg(1, global_batch=6, deepspeed=DeepSpeedConfig(micro_batch_per_rank=4)),
            seed=1,
            ckpt_root=tmp_path / "c",
            export_dir=tmp_path / "e",
            metrics_path=tmp_path / "m.jsonl",
        )


def test_zero3_matches_plain_data_parallel(tiny_dir, sft_rows, tmp_path):
    data = prepare_sft(sft_rows(16, 1), sft_rows(4, 2, "validation"), load_tokenizer(tiny_dir), 256, tools=[])
    exported = {}
    for stage in (0, 3):
        cfg = _cfg(
            3,
            lr=1e-3,
            global_batch=8,
            checkpoint_every=2,
            deepspeed=DeepSpeedConfig(micro_batch_per_rank=4, zero_stage=stage),
        )
        out = train_sft(
            tiny_dir,
            data,
            cfg,
            seed=1,
            ckpt_root=tmp_path / f"ck{stage}",
            export_dir=tmp_path / f"hf{stage}",
            metrics_path=tmp_path / f"m{stage}.jsonl",
        )
        assert out["done"]
        exported[stage] = _weights(tmp_path / f"hf{stage}")
    # atol 1e-5: AdamW turns reduction-order noise of a near-zero gradient element into up to ~lr * 1e-2;
    # a real ZeRO-3 divergence moves many elements by ~lr = 1e-3.
    for name, value in exported[0].items():
        torch.testing.assert_close(value, exported[3][name], rtol=1e-5, atol=1e-5, msg=name)
