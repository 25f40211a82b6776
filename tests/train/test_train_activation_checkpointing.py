"""Activation checkpointing (`deepspeed.activation_checkpointing`): same losses and weights as without, use_cache off
while training, the saved config untouched."""

from __future__ import annotations

import json

import pytest
import torch

from bat.config.deepspeed import DeepSpeedConfig
from bat.config.grpo import GrpoConfig
from bat.config.sft import SftConfig
from bat.policy.loader import load_model, load_tokenizer
from bat.state.jsonl import read_jsonl
from bat.train.engine import prepare_training_model
from bat.train.grpo import train_grpo
from bat.train.grpo_data import build_items
from bat.train.sft import train_sft
from bat.train.sft_data import prepare_sft


@pytest.fixture(autouse=True)
def _lone_process(monkeypatch):
    """Train as a lone process whatever launcher variables an earlier test left in this process's environment
    (`bat.train.engine.dist_env` writes them to os.environ)."""
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS"):
        monkeypatch.delenv(name, raising=False)


def _sft(tiny_dir, data, out, checkpointing: bool) -> dict:
    cfg = SftConfig(
        steps=3,
        lr=3e-3,
        global_batch=8,
        val_every=3,
        checkpoint_every=100,
        deepspeed=DeepSpeedConfig(micro_batch_per_rank=4, activation_checkpointing=checkpointing),
    )
    summary = train_sft(
        tiny_dir, data, cfg, seed=3, ckpt_root=out / "ck", export_dir=out / "hf", metrics_path=out / "m.jsonl"
    )
    assert summary["engine"].module.is_activation_checkpointing is checkpointing
    return summary


def test_sft_and_grpo_losses_match_with_and_without_checkpointing(tiny_dir, sft_rows, grpo_records, tmp_path):
    data = prepare_sft(sft_rows(16, 1), sft_rows(4, 2, "validation"), load_tokenizer(tiny_dir), 256, tools=[])
    off, on = _sft(tiny_dir, data, tmp_path / "off", False), _sft(tiny_dir, data, tmp_path / "on", True)
    losses = [[m["loss"] for m in read_jsonl(tmp_path / run / "m.jsonl") if "loss" in m] for run in ("off", "on")]
    assert len(losses[0]) == 3 and losses[1] == pytest.approx(losses[0], rel=1e-4, abs=1e-6)
    assert losses[0][2] != pytest.approx(losses[0][0], rel=1e-3)  # the steps trained: later losses depend on grads
    assert on["val_loss"] == pytest.approx(off["val_loss"], rel=1e-4)
    a, b = load_model(tmp_path / "off" / "hf").state_dict(), load_model(tmp_path / "on" / "hf").state_dict()
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-4
    saved = json.loads((tmp_path / "on" / "hf" / "config.json").read_text())
    assert saved.get("use_cache") == json.loads((tiny_dir / "config.json").read_text()).get("use_cache")

    rollouts, rewards = grpo_records
    items = build_items(rollouts, rewards, max_seq_len=4096, normalize_std=True, adv_eps=1e-6)
    grpo = []
    for flag in (False, True):
        out = tmp_path / f"grpo_{flag}"
        cfg = GrpoConfig(
            steps=3,
            lr=2e-3,
            step_batches="shuffle",
            minibatch=8,
            kl_coef=1e-2,
            checkpoint_every=100,
            deepspeed=DeepSpeedConfig(micro_batch_per_rank=4, activation_checkpointing=flag),
        )
        train_grpo(tiny_dir, items, cfg, seed=5, ckpt_root=out / "ck", export_dir=out / "hf", metrics_path=out / "m")
        grpo.append([(m["loss"], m["kl"], m["grad_norm"]) for m in read_jsonl(out / "m")])
    assert len(grpo[0]) == 3 and any(kl > 0 for _, kl, _ in grpo[0])
    for plain, checkpointed in zip(*grpo):
        assert checkpointed == pytest.approx(plain, rel=1e-4, abs=1e-7)


def test_training_forward_builds_no_kv_cache(tiny_dir):
    model = load_model(tiny_dir).train()
    prepare_training_model(model, DeepSpeedConfig(activation_checkpointing=True))
    ids = torch.tensor([[1, 2, 3, 4]])
    assert model.is_activation_checkpointing
    assert model(input_ids=ids, use_cache=True).past_key_values is None
    assert model.eval()(input_ids=ids, use_cache=True).past_key_values is not None  # eval keeps the caller's choice
    assert model.config.use_cache == load_model(tiny_dir).config.use_cache
