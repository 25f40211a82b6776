"""A 2-process DeepSpeed (gloo, ZeRO-2) SFT run through the CLI equals the 1-process run on the same global batch."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
import torch

from bat.policy.loader import load_model
from bat.state.atomic import atomic_write_json
from bat.state.checkpoints import CheckpointStore
from bat.state.jsonl import read_jsonl, write_jsonl


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(cmd: list[str], cwd) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT", "MASTER_ADDR")
    }
    env |= {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.mark.slow
def test_two_process_deepspeed_matches_one_process(tiny_dir, sft_rows, tmp_path):
    write_jsonl(tmp_path / "train.jsonl", sft_rows(16, 1))
    write_jsonl(tmp_path / "val.jsonl", sft_rows(4, 2, "validation"))
    common = [
        "train",
        "sft",
        "--model",
        str(tiny_dir),
        "--train",
        str(tmp_path / "train.jsonl"),
        "--val",
        str(tmp_path / "val.jsonl"),
        "--seed",
        "4",
        "--set",
        "sft.steps=3",
        "--set",
        "sft.global_batch=8",
        "--set",
        "sft.lr=1e-3",
        "--set",
        "sft.render_tools=false",
        "--set",
        "sft.checkpoint_every=2",
        "--set",
        "sft.val_every=3",
    ]
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    _run(
        [
            sys.executable,
            "-m",
            "bat.cli.main",
            *common,
            "--out",
            str(tmp_path / "one"),
            "--set",
            "sft.deepspeed.micro_batch_per_rank=4",
            "--set",
            f"sft.deepspeed.master_port={_free_port()}",
        ],
        repo,
    )
    _run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "2",
            "--master-port",
            str(_free_port()),
            "-m",
            "bat.cli.main",
            *common,
            "--out",
            str(tmp_path / "two"),
            "--set",
            "sft.deepspeed.micro_batch_per_rank=2",
            "--set",
            "sft.deepspeed.zero_stage=2",
        ],
        repo,
    )
    step_dir = CheckpointStore(tmp_path / "two" / "checkpoints").path(3)
    assert (step_dir / "rng_rank0.pt").exists() and (step_dir / "rng_rank1.pt").exists()
    assert (step_dir / "zero_pp_rank_1_mp_rank_00_optim_states.pt").exists()
    one = load_model(tmp_path / "one" / "export").state_dict()
    two = load_model(tmp_path / "two" / "export").state_dict()
    for name in one:
        torch.testing.assert_close(one[name], two[name], rtol=1e-4, atol=1e-5, msg=name)
    m1 = [m["loss"] for m in read_jsonl(tmp_path / "one" / "metrics.jsonl") if "loss" in m]
    m2 = [m["loss"] for m in read_jsonl(tmp_path / "two" / "metrics.jsonl") if "loss" in m]
    assert m1 == pytest.approx(m2, rel=1e-4) and len(m2) == 3
    assert read_jsonl(tmp_path / "two" / "metrics.jsonl")[-1]["val_loss"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("step_batches", ["plan", "shuffle"])
def test_two_process_zero3_grpo_matches_one_process(tiny_dir, grpo_records, make_grpo_plan, tmp_path, step_batches):
    """Plan steps of 8 and 4 rollouts (the second padded to the first's accumulation count on either side), or
    shuffled minibatches, give the same weights on one process and on two ZeRO-3 ranks."""
    rollouts, rewards = grpo_records
    write_jsonl(tmp_path / "rollouts.jsonl", rollouts)
    write_jsonl(tmp_path / "rewards.jsonl", rewards)
    plan = make_grpo_plan(str(tiny_dir), [["state0", "state1"], ["state2"]])
    atomic_write_json(tmp_path / "plan.json", plan)
    common = [
        "train",
        "grpo",
        "--model",
        str(tiny_dir),
        "--rollouts",
        str(tmp_path / "rollouts.jsonl"),
        "--rewards",
        str(tmp_path / "rewards.jsonl"),
        "--seed",
        "2",
        "--set",
        "grpo.steps=2",
        "--set",
        "grpo.lr=1e-3",
        "--set",
        "grpo.loss_agg=seq-mean-token-mean",
        "--set",
        "grpo.kl_coef=0.01",
        "--set",
        f"grpo.step_batches={step_batches}",
        *(["--plan", str(tmp_path / "plan.json")] if step_batches == "plan" else []),
    ]
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    _run(
        [
            sys.executable,
            "-m",
            "bat.cli.main",
            *common,
            "--out",
            str(tmp_path / "one"),
            "--set",
            "grpo.deepspeed.micro_batch_per_rank=4",
        ],
        repo,
    )
    _run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "2",
            "--master-port",
            str(_free_port()),
            "-m",
            "bat.cli.main",
            *common,
            "--out",
            str(tmp_path / "two"),
            "--set",
            "grpo.deepspeed.micro_batch_per_rank=2",
            "--set",
            "grpo.deepspeed.zero_stage=3",
        ],
        repo,
    )
    one = load_model(tmp_path / "one" / "export").state_dict()
    two = load_model(tmp_path / "two" / "export").state_dict()
    for name in one:
        torch.testing.assert_close(one[name], two[name], rtol=1e-4, atol=1e-5, msg=name)
    m1, m2 = read_jsonl(tmp_path / "one" / "metrics.jsonl"), read_jsonl(tmp_path / "two" / "metrics.jsonl")
    assert [m["loss"] for m in m1] == pytest.approx([m["loss"] for m in m2], rel=1e-4, abs=1e-6)
    assert [m["clip_frac"] for m in m1] == pytest.approx([m["clip_frac"] for m in m2])
