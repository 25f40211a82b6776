"""Launcher glue without launching: srun/torchrun env mapping, schedule shape, DeepSpeed config, backend choice."""

from __future__ import annotations

import math

import pytest

from bat.config.deepspeed import DeepSpeedConfig
from bat.train.common import batch_indices, plan_accumulation
from bat.train.engine import DistEnv, dist_env, ds_config, resolve_backend, warmup_cosine

_VARS = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_LOCALID",
    "SLURM_JOB_NODELIST",
    "SLURM_NODELIST",
)


@pytest.fixture
def clean_env(monkeypatch):
    for name in _VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_srun_variables_map_to_torch_ranks(clean_env):
    clean_env.setenv("SLURM_PROCID", "3")
    clean_env.setenv("SLURM_NTASKS", "4")
    clean_env.setenv("SLURM_LOCALID", "1")
    clean_env.setenv("SLURM_JOB_NODELIST", "gpu07")
    env = dist_env(29999)
    assert (env.rank, env.world, env.local_rank, env.is_main) == (3, 4, 1, False)
    import os

    assert os.environ["MASTER_PORT"] == "29999" and os.environ["MASTER_ADDR"] == "gpu07"


def test_torchrun_variables_win_and_lone_process_gets_a_free_port(clean_env):
    clean_env.setenv("RANK", "1")
    clean_env.setenv("WORLD_SIZE", "2")
    clean_env.setenv("LOCAL_RANK", "1")
    clean_env.setenv("MASTER_PORT", "31000")
    clean_env.setenv("SLURM_PROCID", "0")
    clean_env.setenv("SLURM_NTASKS", "8")
    assert dist_env(29999) == DistEnv(1, 2, 1)
    for name in _VARS:
        clean_env.delenv(name, raising=False)
    env = dist_env(29999)
    import os

    assert env.world == 1 and env.rank == 0 and os.environ["MASTER_PORT"] != "29999"


def test_warmup_then_cosine_to_floor():
    f = warmup_cosine(total_steps=100, warmup_ratio=0.1, min_lr_ratio=0.1)
    assert [round(f(s), 6) for s in (0, 4, 9)] == [0.1, 0.5, 1.0]
    assert f(10) == pytest.approx(1.0)
    assert f(55) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert f(100) == pytest.approx(0.1) and f(500) == pytest.approx(0.1)


def test_deepspeed_config_and_backend():
    section = DeepSpeedConfig(zero_stage=2, offload_optimizer=True, micro_batch_per_rank=3)
    cfg = ds_config(section, grad_accum=5, grad_clip=0.5, precision="fp32")
    assert cfg["zero_optimization"] == {"stage": 2, "offload_optimizer": {"device": "cpu"}}
    assert cfg["train_micro_batch_size_per_gpu"] == 3 and cfg["gradient_accumulation_steps"] == 5
    assert cfg["gradient_clipping"] == 0.5 and not cfg["bf16"]["enabled"] and not cfg["fp16"]["enabled"]
    bf16 = ds_config(section, grad_accum=5, grad_clip=0.5, precision="bf16")
    assert bf16["bf16"] == {"enabled": True} and not bf16["fp16"]["enabled"]
    import torch

    if not torch.cuda.is_available():
        assert resolve_backend(DeepSpeedConfig()) == "gloo"
        with pytest.raises(ValueError, match="needs CUDA"):
            resolve_backend(DeepSpeedConfig(backend="nccl"))


def test_batch_order_is_seeded_and_cursor_addressable():
    full = batch_indices(10, 0, 25, seed=3)
    assert sorted(full[:10]) == list(range(10)) and sorted(full[10:20]) == list(range(10))
    assert batch_indices(10, 7, 6, seed=3) == full[7:13]
    assert batch_indices(10, 0, 10, seed=4) != full[:10]
    assert plan_accumulation(16, 4, 2, "x") == 2
    with pytest.raises(ValueError, match="valid values include"):
        plan_accumulation(10, 4, 1, "x")
