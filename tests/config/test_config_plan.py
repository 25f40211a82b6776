"""`bat config plan`: per phase, the Slurm request against GPU memory, host memory and CPUs needed; `bat config check`
and `bat run` refuse a Slurm config whose plan does not fit, local runs are unaffected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bat.cli.main import main
from bat.config import ConfigError, load_config
from bat.config.pretrained import REGISTRY
from bat.orchestrate.executors import resource_parameters
from bat.orchestrate.plan import PLAN_PHASES, plan_phase, plan_problems, plan_run
from bat.orchestrate.plan_memory import GIB, kv_bytes_per_token, training_state

RECIPE = str(Path(__file__).resolve().parents[2] / "configs" / "cluster" / "qwen9b_8xgpu.yaml")
OVERRIDES_135M = ["model.pretrained=smollm2-135m-instruct", "sft.max_seq_len=1024"]
JOBS = ("synthesize", "scan", "sft", "rollout", "verify", "grpo", "evaluate", "route", "final_test", "driver")


def _plan(capsys, *overrides: str) -> tuple[int, str]:
    code = main(["config", "plan", RECIPE, *(arg for o in overrides for arg in ("--set", o))])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _items(plan, where: str) -> dict[str, float]:
    return {item.label: item.bytes for item in getattr(plan, where)}


def test_the_9b_recipe_fits_and_every_job_is_listed(capsys):
    code, out = _plan(capsys)
    assert code == 0, out
    assert set(PLAN_PHASES) == set(JOBS)
    headings = [line for line in out.splitlines() if line in JOBS]
    assert headings == list(JOBS)
    assert out.count("  asks  partition") == len(JOBS) and "DOES NOT FIT" not in out
    assert f"fits: all {len(JOBS)} jobs" in out
    assert "9,000,000,000 parameters" in out and "from model.shape" in out  # /shared/models is not on this machine
    _, _, plans = plan_run(load_config(RECIPE))
    by_phase = {plan.phase: plan for plan in plans}
    for phase in ("sft", "grpo"):
        assert "checkpointing on" in next(i.detail for i in by_phase[phase].gpu if i.label == "activations")
    assert "KL reference" in _items(by_phase["grpo"], "gpu")  # grpo.kl_reference: checkpoint


def test_model_dtype_sizes_the_loaded_copies_and_sets_the_training_precision():
    """The policy load, GRPO's KL reference and the route's two KL copies are in model.dtype; DeepSpeed trains in its
    precision (the recipe's bfloat16 -> bf16; float32 -> fp32)."""
    recipe = load_config(RECIPE)
    shape = plan_run(recipe)[0]
    params = shape.parameter_count()
    for config, width, precision in ((recipe, 2, "bf16"), (load_config(RECIPE, ["model.dtype=float32"]), 4, "fp32")):
        grpo, route = plan_phase(config, shape, "grpo"), plan_phase(config, shape, "route")
        assert _items(grpo, "gpu")["KL reference"] == params * width
        assert _items(grpo, "host")["checkpoint load"] == 8 * params * width  # 8 ranks each load it first
        assert _items(route, "host")["KL models"] == 2 * params * width
        assert next(i.detail for i in grpo.gpu if i.label == "weights").startswith(f"{precision} ")
    with pytest.raises(ConfigError, match="grpo.deepspeed.precision=bf16 does not match model.dtype=float32"):
        load_config(RECIPE, ["model.dtype=float32", "grpo.deepspeed.precision=bf16"])


def test_too_little_host_memory_for_grpo_exits_2_naming_grpo(capsys):
    code, out = _plan(capsys, "orchestrate.resources.grpo.mem_gb=16")
    assert code == 2
    assert "Traceback" not in out
    problems = out.split("DOES NOT FIT:", 1)[1].strip().splitlines()[1:]
    assert len(problems) == 1 and problems[0].strip().startswith("grpo: host memory per node needs")
    assert "has 16.0 GiB (orchestrate.resources.grpo.mem_gb)" in problems[0]


def test_zero_stage_0_for_the_9b_does_not_fit_sft_on_the_gpu(capsys):
    code, out = _plan(capsys, "sft.deepspeed.zero_stage=0")
    assert code == 2
    problems = plan_problems(load_config(RECIPE, ["sft.deepspeed.zero_stage=0"]))
    assert len(problems) == 1 and problems[0].startswith("sft: GPU memory per GPU needs")
    assert problems[0] in out and "has 80.0 GiB (orchestrate.gpu_mem_gb)" in problems[0]
    sft = plan_phase(load_config(RECIPE, ["sft.deepspeed.zero_stage=0"]), plan_run(load_config(RECIPE))[0], "sft")
    assert _items(sft, "gpu")["optimizer"] == pytest.approx(12 * 9e9)  # not divided over the 8 ranks


def test_activation_checkpointing_off_does_not_fit_grpo():
    problems = plan_problems(load_config(RECIPE, ["grpo.deepspeed.activation_checkpointing=false"]))
    assert [p.split(":")[0] for p in problems] == ["grpo"]
    assert "GPU memory per GPU" in problems[0]


def test_launcher_tasks_cpus_are_per_task_and_multiply_by_the_gpus():
    config = load_config(RECIPE, ["orchestrate.resources.sft.cpus=64"])
    shape = plan_run(config)[0]
    sft = plan_phase(config, shape, "sft")
    params = resource_parameters(config, "sft", "slurm")
    assert sft.tasks == params["tasks_per_node"] == 8 and params["cpus_per_task"] == 64
    cpus = next(c for c in sft.checks if c.what.startswith("CPUs per node"))
    assert (cpus.need, cpus.limit, cpus.ok) == (512, 64, False)
    assert plan_problems(config) == [
        "sft: CPUs per node (cpus 64 x 8 tasks) asks 512 CPUs, has 64 (orchestrate.node_cpus)"
    ]
    single = load_config(RECIPE, ["orchestrate.resources.sft.launcher=single"])
    sft_single = plan_phase(single, shape, "sft")
    assert sft_single.tasks == resource_parameters(single, "sft", "slurm")["tasks_per_node"] == 1
    assert any("uses 1 of the 8 GPUs" in note for note in sft_single.notes)
    rollout = plan_phase(config, shape, "rollout")  # launcher single: one task with all 64 CPUs
    assert rollout.tasks == 1 and next(c for c in rollout.checks if c.what.startswith("CPUs")).need == 64
    node = load_config(RECIPE, ["orchestrate.resources.sft.cpus=64", "orchestrate.resources.sft.node_cpus=512"])
    assert plan_problems(node) == []


def test_numbers_for_the_135m_policy_are_sane():
    shape = REGISTRY["smollm2-135m-instruct"].shape
    assert shape.parameter_count() == 134_515_008  # the converted model's bat_model.json record
    state, offload = training_state(shape.parameter_count(), "fp32", 0, 1, False)
    weights = {item.label: item.bytes for item in state}
    assert weights["weights"] == 4 * 134_515_008 and 0.53e9 < weights["weights"] < 0.55e9
    assert weights["gradients"] == weights["weights"] and weights["optimizer"] == 2 * weights["weights"]
    assert offload == 0 and kv_bytes_per_token(shape, "float32") == 2 * 30 * 3 * 64 * 4
    config = load_config(None, OVERRIDES_135M)
    sft = plan_phase(config, shape, "sft")
    host = _items(sft, "host")  # gpus 0 by default: training on the CPU, everything in host memory
    assert sft.gpu == [] and host["weights"] == weights["weights"]
    assert host["activations"] == 4 * 1024 * 30 * 34 * 576 * 2  # 4096 tokens x layers x 34 h, doubled in fp32
    assert host["logits"] == 4 * 1024 * 49152 * 12  # micro 4 x 1024 positions x vocab x 12 B in fp32
    assert 9 * GIB < sum(host.values()) < 10 * GIB
    checkpointed = plan_phase(
        load_config(None, [*OVERRIDES_135M, "sft.deepspeed.activation_checkpointing=true"]), shape, "sft"
    )
    assert _items(checkpointed, "host")["activations"] == 4096 * (30 * 2 * 576 * 2 + 34 * 576 * 2)


def test_config_json_at_model_path_wins_over_model_shape(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    shape = REGISTRY["smollm2-135m-instruct"].shape
    folder.joinpath("config.json").write_text(json.dumps({**shape.model_dump(exclude={"params"}), "model_type": "x"}))
    given = "model.shape={num_hidden_layers: 2, hidden_size: 64, num_attention_heads: 2, intermediate_size: 8, vocab_size: 9}"
    planned, source = load_config(None, [f"model.path={folder}", given]).model.planned_shape()
    assert planned.parameter_count() == 134_515_008 and source.startswith("config.json at model.path")
    planned, source = load_config(None, [f"model.path={tmp_path / 'absent'}", given]).model.planned_shape()
    assert planned.num_hidden_layers == 2 and source.startswith("model.shape")
    with pytest.raises(ConfigError, match="model.shape describes the model at model.path"):
        load_config(None, [given])
    assert "model.path" in plan_problems(load_config(None, [f"model.path={tmp_path / 'absent'}"]))[0]
    folder.joinpath("config.json").write_text(json.dumps({"model_type": "x", "hidden_size": 64}))  # no usable shape
    planned, source = load_config(None, [f"model.path={folder}", given]).model.planned_shape()
    assert planned.num_hidden_layers == 2 and "without a usable shape" in source
    problem = plan_problems(load_config(None, [f"model.path={folder}"]))[0]
    assert "lacks integer ['num_hidden_layers'" in problem and "set model.shape" in problem


def test_config_check_refuses_a_slurm_config_that_does_not_fit(capsys):
    assert main(["config", "check", RECIPE]) == 0
    assert "ok   " in capsys.readouterr().out
    assert main(["config", "check", RECIPE, "--set", "orchestrate.resources.grpo.mem_gb=16"]) == 2
    out = capsys.readouterr().out
    assert "FAIL" in out and "grpo: host memory per node needs" in out and "Traceback" not in out
    local = ["--set", "orchestrate.resources.grpo.mem_gb=16", "--set", "orchestrate.executor=local"]
    assert main(["config", "check", RECIPE, *local]) == 0  # local runs are unaffected


def test_bat_run_refuses_a_slurm_config_that_does_not_fit(tmp_path, capsys):
    code = main(
        ["run", "--config", RECIPE, "--state", str(tmp_path / "s"), "--set", "orchestrate.resources.grpo.mem_gb=16"]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "refusing to queue round 0" in err and "grpo: host memory per node needs" in err
    assert not (tmp_path / "s" / "run.json").exists()


def test_config_sbatch_prints_the_driver_resources_of_the_config(capsys):
    assert main(["config", "sbatch", RECIPE, "--set", "orchestrate.resources.driver.time_min=20"]) == 0
    flags = capsys.readouterr().out.split()
    assert flags == ["--job-name=qwen9b.driver", "--time=20", "--cpus-per-task=1", "--mem=2048M", "--partition=cpu"]
