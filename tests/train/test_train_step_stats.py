"""Per-weight step statistics between two checkpoints: zero for one folder against itself, the exact figures of a
known step, and a clear error for folders that are not two checkpoints of one model."""

from __future__ import annotations

import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from bat.train.step_stats import main, step_stats


def test_a_sign_step_of_size_lr_is_seen_as_one(tiny_dir, tmp_path):
    same = step_stats(tiny_dir, tiny_dir, lr=1e-3)
    assert same["moved_fraction"] == 0.0 and same["step_l2"] == 0.0 and same["at_lr_fraction"] == 0.0

    after = tmp_path / "after"
    shutil.copytree(tiny_dir, after)
    (weights,) = list(after.glob("*.safetensors"))
    tensors = load_file(str(weights))
    gen = torch.Generator().manual_seed(1)
    stepped = {k: v + 1e-3 * torch.sign(torch.randn(v.shape, generator=gen)) for k, v in tensors.items()}
    save_file(stepped, str(weights), metadata={"format": "pt"})
    stats = step_stats(tiny_dir, after, lr=1e-3)
    n = sum(v.numel() for v in tensors.values())
    assert stats["weights"] == n and stats["moved_fraction"] > 0.99 and stats["at_lr_fraction"] > 0.99
    assert stats["step_median"] == pytest.approx(1e-3, rel=0.05)
    assert stats["step_l2"] == pytest.approx(1e-3 * n**0.5, rel=0.05)


def test_folders_that_are_not_two_checkpoints_of_one_model_exit_2(tiny_dir, small_cfg, tiny_model_builder, capsys):
    wider = tiny_model_builder(small_cfg.model_copy(update={"vocab_size": 600}), 7)
    with pytest.raises(ValueError, match="hold different tensors"):
        step_stats(tiny_dir, wider)
    assert main([str(tiny_dir), str(tiny_dir.parent)]) == 2
    assert "no *.safetensors file" in capsys.readouterr().err
