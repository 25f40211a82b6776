"""The lr probe's premise: one GRPO step from a fresh optimizer is linear in lr, so scaling a recorded step is exact."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from bat.cli.main import main
from bat.config.deepspeed import DeepSpeedConfig
from bat.config.grpo import GrpoConfig
from bat.curriculum.lr_probe import write_scaled
from bat.state.atomic import atomic_write_json
from bat.state.jsonl import write_jsonl
from bat.state.layout import RunLayout
from bat.state.markers import write_done
from bat.train.grpo import train_grpo
from bat.train.grpo_data import build_items


def _step(tiny_dir, records, lr, out):
    rollouts, rewards = records
    data = build_items(rollouts, rewards, max_seq_len=4096, normalize_std=True, adv_eps=1e-6)
    cfg = GrpoConfig(
        steps=1, lr=lr, step_batches="shuffle", minibatch=8, deepspeed=DeepSpeedConfig(micro_batch_per_rank=4)
    )
    train_grpo(tiny_dir, data, cfg, seed=5, ckpt_root=out / "ckpt", export_dir=out / "hf", metrics_path=out / "m")
    return out / "hf"


def test_one_step_from_a_fresh_optimizer_scales_with_lr_and_the_probe_reproduces_it(tiny_dir, grpo_records, tmp_path):
    small = _step(tiny_dir, grpo_records, 1e-3, tmp_path / "small")
    large = _step(tiny_dir, grpo_records, 4e-3, tmp_path / "large")
    start, a, b = (load_file(str(p / "model.safetensors")) for p in (tiny_dir, small, large))
    moved = 0
    for key, theta in start.items():
        step_a, step_b = a[key] - theta, b[key] - theta
        assert torch.allclose(step_b, 4 * step_a, atol=1e-6), key  # 0.1% of the step: float32 rounding near 1.0
        moved += int((step_a != 0).sum())
    assert moved > 0.5 * sum(t.numel() for t in start.values())  # Adam's first step moves (nearly) every weight
    probed = load_file(str(write_scaled(tiny_dir, small, 4.0, tmp_path / "x4") / "model.safetensors"))
    assert probed.keys() <= b.keys() and all(torch.allclose(probed[k], b[k], atol=1e-6) for k in probed)
    assert write_scaled(tiny_dir, small, 4.0, tmp_path / "x4") == tmp_path / "x4"  # a finished export is kept


def test_lr_probe_refuses_rounds_it_cannot_scale(tmp_path, capsys, make_grpo_plan):
    layout = RunLayout(tmp_path / "run").ensure()
    args = ["train", "lr-probe", "--state", str(layout.root), "--round", "1", "--scales", "0,5", "--out"]
    assert main([*args, str(tmp_path / "probe")]) == 2
    err = capsys.readouterr().err
    assert "round 1 of" in err and "no finished grpo phase" in err
    write_done(layout.phase_dir(1, "grpo"), phase="grpo", config_hash="x", counts={"step": 1})
    assert main([*args, str(tmp_path / "probe")]) == 2  # the step count and lr come from the phase's metrics
    assert "ran 0 steps" in capsys.readouterr().err
    write_jsonl(layout.training_metrics(1, "grpo"), [{"step": 1, "lr": 1e-5}])
    assert main([*args, str(tmp_path / "probe")]) == 2
    assert "candidate export is missing" in capsys.readouterr().err
    layout.candidate_model(1).mkdir(parents=True)
    (layout.candidate_model(1) / "config.json").write_text("{}")
    assert main([*args, str(tmp_path / "probe")]) == 2  # the start checkpoint comes from the round's plan
    assert "no round plan for round 1" in capsys.readouterr().err
    atomic_write_json(layout.plan(1), make_grpo_plan("a", [["state1"]]))
    assert main([*args, str(tmp_path / "probe"), "--candidate", str(tmp_path / "nowhere")]) == 2
    assert "nowhere is not an HF export" in capsys.readouterr().err
    assert main([*args, str(tmp_path / "probe")]) == 2  # the probe never creates a secret in the run
    assert "SECRET is missing" in capsys.readouterr().err and not layout.heldout_secret.exists()
    write_jsonl(layout.training_metrics(1, "grpo"), [{"step": s, "lr": 1e-5} for s in (1, 2, 3)])
    assert main([*args, str(tmp_path / "probe")]) == 2
    assert "ran 3 steps" in capsys.readouterr().err
    with pytest.raises(SystemExit) as bad:
        main([*args[:-2], "5,-1", "--out", str(tmp_path / "probe")])
    assert bad.value.code == 2 and "numbers >= 0" in capsys.readouterr().err
    assert not (tmp_path / "probe").exists()
