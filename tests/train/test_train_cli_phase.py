"""CLI (`bat model build-tiny`, `bat train grpo`) and the grpo phase function on shards laid out by the round."""

from __future__ import annotations

import torch

from bat.cli.main import main
from bat.config import BatConfig
from bat.phase.context import PhaseContext
from bat.state.atomic import atomic_write_json
from bat.state.bank_layout import BankVersionLayout
from bat.state.checkpoints import CheckpointStore
from bat.state.jsonl import read_jsonl, write_jsonl
from bat.state.layout import RunLayout
from bat.train.phase import run_grpo


def test_build_tiny_cli(tmp_path, capsys):
    code = main(
        [
            "model",
            "build-tiny",
            "--out",
            str(tmp_path / "m"),
            "--seed",
            "3",
            "--set",
            "model.tiny.hidden_size=32",
            "--set",
            "model.tiny.vocab_size=400",
            "--set",
            "model.tiny.intermediate_size=64",
            "--set",
            "model.tiny.num_layers=1",
        ]
    )
    assert code == 0
    assert "parameters, vocab 400, seed 3" in capsys.readouterr().out
    assert (tmp_path / "m" / "model.safetensors").exists() and (tmp_path / "m" / "chat_template.jinja").exists()


def test_train_grpo_cli_and_bad_input(tiny_dir, grpo_records, make_grpo_plan, tmp_path, capsys):
    rollouts, rewards = grpo_records
    write_jsonl(tmp_path / "rollouts.jsonl", rollouts)
    write_jsonl(tmp_path / "rewards.jsonl", rewards)
    args = [
        "train",
        "grpo",
        "--model",
        str(tiny_dir),
        "--rollouts",
        str(tmp_path / "rollouts.jsonl"),
        "--rewards",
        str(tmp_path / "rewards.jsonl"),
        "--out",
        str(tmp_path / "out"),
        "--set",
        "grpo.steps=2",
        "--set",
        "grpo.deepspeed.micro_batch_per_rank=4",
        "--set",
        "grpo.lr=1e-4",
    ]
    assert main(args) == 2  # plan steps (the default) need the round plan
    assert "pass --plan round_NN/plan.json, or --set grpo.step_batches=shuffle" in capsys.readouterr().err
    plan = make_grpo_plan(str(tiny_dir), [["state0", "state1"]])
    atomic_write_json(tmp_path / "plan.json", plan)
    assert main([*args, "--plan", str(tmp_path / "plan.json")]) == 0
    summary = read_jsonl(tmp_path / "out" / "metrics.jsonl")
    assert [m["step"] for m in summary] == [1, 2]
    assert all(m["groups"] == 2 and m["rollouts_by_pool"] == {"E2E": 4, "S-target": 4} for m in summary)
    assert (tmp_path / "out" / "export" / "model.safetensors").exists()
    assert (tmp_path / "out" / "summary.json").exists()
    bad = [*args[:-6], "--set", "grpo.step_batches=shuffle", "--set", "grpo.minibatch=6"]
    bad += ["--set", "grpo.deepspeed.micro_batch_per_rank=4"]
    bad[bad.index("--out") + 1] = str(tmp_path / "bad")
    assert main(bad) == 2
    assert "valid values include" in capsys.readouterr().err
    missing = [*args]
    missing[missing.index("--rewards") + 1] = str(tmp_path / "nope.jsonl")
    assert main(missing) == 2


def test_grpo_phase_reads_finished_shards_and_writes_candidate(tiny_dir, grpo_records, make_grpo_plan, tmp_path):
    rollouts, rewards = grpo_records
    layout = RunLayout(tmp_path / "run").ensure()
    for shard, (lo, hi) in enumerate(((0, 12), (12, 24))):
        rdir = layout.phase_dir(1, "rollout") / f"shard_{shard:04d}"
        vdir = layout.phase_dir(1, "verify") / f"shard_{shard:04d}"
        write_jsonl(rdir / "rollouts.jsonl", rollouts[lo:hi])
        write_jsonl(vdir / "rewards.jsonl", rewards[lo:hi])
        atomic_write_json(rdir / "DONE.json", {})
        atomic_write_json(vdir / "DONE.json", {})
    (layout.phase_dir(1, "rollout") / "shard_0002").mkdir()  # unfinished: ignored and counted
    plan = make_grpo_plan(str(tiny_dir), [["state0"]])
    atomic_write_json(layout.plan(1), plan)
    config = BatConfig.model_validate({"grpo": {"steps": 2, "lr": 1e-4, "deepspeed": {"micro_batch_per_rank": 4}}})
    result = run_grpo(PhaseContext(config=config, layout=layout, round=1, phase="grpo"))
    assert result.extra["candidate"] == str(layout.candidate_model(1))
    assert (layout.candidate_model(1) / "model.safetensors").exists()
    assert result.counts["trainable"] == 22 and result.counts["unfinished_rollout_shards"] == 1
    assert CheckpointStore(layout.round_checkpoints(1)).valid_steps() == [2]
    metrics = read_jsonl(layout.phase_dir(1, "grpo") / "metrics.jsonl")
    assert len(metrics) == 2 and all(m["groups"] == 1 and m["rollouts"] == 4 for m in metrics)  # the plan's batch
    assert result.extra["last_step"]["step"] == 2


def test_sft_phase_trains_on_the_admitted_bank(tiny_dir, sft_rows, tmp_path):
    from bat.bank import store
    from bat.train.phase import run_sft

    layout = RunLayout(tmp_path / "run").ensure()

    def fill(build):
        write_jsonl(BankVersionLayout(build).sft_split("train"), sft_rows(16, 1))
        write_jsonl(BankVersionLayout(build).sft_split("validation"), sft_rows(4, 2, "validation"))
        return {"sft": 20}

    bank = store.write_version(
        layout,
        fill,
        dict(
            fingerprint="fp",
            generator_versions={"bank": "1"},
            seeds={"bank": 1},
            reduction_grid="v1",
            stages=["S1"],
            tracks=["classification"],
            config={},
        ),
    )
    (bank.files.admitted_marker).write_text("ok\n")
    config = BatConfig.model_validate(
        {
            "model": {"path": str(tiny_dir)},
            "sft": {
                "steps": 3,
                "lr": 1e-3,
                "global_batch": 8,
                "render_tools": False,
                "checkpoint_every": 2,
                "deepspeed": {"micro_batch_per_rank": 8},
            },
        }
    )
    result = run_sft(PhaseContext(config=config, layout=layout, round=0, phase="sft"))
    assert result.extra["candidate"] == str(layout.candidate_model(0))
    assert (layout.candidate_model(0) / "model.safetensors").exists()
    assert result.counts["train_kept"] == 16 and result.counts["val_kept"] == 4 and result.counts["step"] == 3
    assert result.extra["val_loss"] < result.extra["first_val_loss"]
    assert CheckpointStore(layout.sft_checkpoints).valid_steps() == [2, 3]
    kernels = result.extra["kernels"]  # what selected the CPU kernels, recorded beside the outputs
    assert (
        kernels["threads"] == torch.get_num_threads()
        and kernels["capability"] == torch.backends.cpu.get_cpu_capability()
    )
