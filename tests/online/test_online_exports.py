"""`grpo.export_steps`: an online block writes HF exports of its weights after the listed steps
(`OnlineLayout.export`), so the held-out stage probe can score them from the evaluation side."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from bat.config.grpo import GrpoConfig
from bat.config.model import TinyModelConfig
from bat.state.layout import RunLayout
from bat.state.online_layout import OnlineLayout

SMALL = TinyModelConfig(
    vocab_size=512, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=128, max_positions=512
)


def test_export_steps_write_the_weights_of_those_steps(tiny_model_builder, tmp_path):
    from bat.online.block import train_online
    from bat.online.learning_check import check_config, digits_source
    from bat.state.digest import sha256_path

    model = tiny_model_builder(SMALL, 0)
    layout = RunLayout(tmp_path / "run")
    source = digits_source(model, tmp_path, groups=2, k=2, max_new_tokens=4)
    cfg = check_config(3, lr=1e-2, shuffle=False, micro_batch=4).model_copy(update={"export_steps": (1, 3)})
    train_online(
        model,
        source,
        cfg,
        seed=3,
        round_index=1,
        root=tmp_path / "online",
        ckpt_root=layout.round_checkpoints(1),
        export_dir=layout.candidate_model(1),
        metrics_path=tmp_path / "metrics.jsonl",
    )
    online = OnlineLayout(tmp_path / "online")
    first, last = online.export(1), online.export(3)
    assert sorted(p.name for p in first.parent.iterdir()) == ["step_00001", "step_00003"]
    assert json.loads((first / "bat_export.json").read_text())["steps"] == 1
    assert sha256_path(last / "model.safetensors") == sha256_path(layout.candidate_model(1) / "model.safetensors")
    assert sha256_path(first / "model.safetensors") != sha256_path(last / "model.safetensors")


def test_export_steps_are_checked_against_the_block():
    assert GrpoConfig(steps=3, rollouts="online", export_steps=(1, 3)).export_steps == (1, 3)
    with pytest.raises(ValidationError, match=r"export_steps \[4\] outside the block's steps; valid: 1..3"):
        GrpoConfig(steps=3, rollouts="online", export_steps=(1, 4))
    with pytest.raises(ValidationError, match="needs grpo.rollouts: online"):
        GrpoConfig(steps=3, export_steps=(1,))
