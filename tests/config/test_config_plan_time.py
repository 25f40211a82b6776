"""The time plan and LoRA in `bat config plan`: each model phase's time from the config's work sizes and the stated
(or measured) rates, the route's KL check refused when it cannot finish within its allocations, LoRA counted as a
frozen base plus trained adapters, and the shape read from the model's own config.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bat.cli.main import main
from bat.config import load_config
from bat.orchestrate.plan import plan_run
from bat.orchestrate.plan_memory import GIB, lora_parameters, total
from bat.perf.machine import measure_cpu_gflops

RECIPE = Path(__file__).resolve().parents[2] / "configs" / "cluster" / "qwen9b_8xgpu.yaml"
OLD_ROUTE = [
    "orchestrate.resources.route={partition: cpu, cpus: 16, mem_gb: 160, time_min: 30}",
    "curriculum.fallback.kl_prompts=256",
]


def _plans(overrides=(), cpu_rate=None):
    return {p.phase: p for p in plan_run(load_config(RECIPE, list(overrides)), cpu_rate)[2]}


def _time_check(plan):
    return next(c for c in plan.checks if c.what.startswith("time"))


def test_every_model_phase_of_the_9b_recipe_has_a_time_that_fits():
    plans = _plans()
    for phase in ("sft", "grpo", "rollout", "evaluate", "route", "final_test"):
        assert _time_check(plans[phase]).ok, plans[phase].notes
    notes = " ".join(plans["sft"].notes)
    assert "200 steps x 64 x 8192 tokens x 8N FLOPs; 8 GPUs x 312 TFLOP/s x MFU 0.35 (stated)" in notes
    assert "KL check: 64 prompts" in " ".join(plans["route"].notes)
    assert "not estimated" in " ".join(plans["verify"].notes)


def test_the_old_route_cannot_finish_and_the_plan_names_it(capsys):
    route = _plans(OLD_ROUTE)["route"]
    check = _time_check(route)
    assert not check.ok and check.need > check.limit == 4
    assert any(p.startswith("route: time ~") for p in route.problems)
    args = ["config", "plan", str(RECIPE), *(x for o in OLD_ROUTE for x in ("--set", o))]
    assert main(args) == 2
    out = capsys.readouterr().out
    assert "DOES NOT FIT: 1 problem(s)" in out and "route: time ~" in out


def test_a_measured_cpu_rate_replaces_the_stated_one():
    rate, where = measure_cpu_gflops("float32", seconds=0.2)
    assert rate > 0 and where.startswith("measured on this host")
    stated, measured = _plans(OLD_ROUTE)["route"], _plans(OLD_ROUTE, (rate * 1000, where))["route"]
    assert "measured on this host" in " ".join(measured.notes)
    assert _time_check(measured).need < _time_check(stated).need


def test_lora_counts_a_frozen_base_and_the_adapters():
    full, lora = _plans()["grpo"], _plans(["grpo.lora.enabled=true", "grpo.lora.r=16"])["grpo"]
    assert total(lora.gpu) < total(full.gpu) - 1 * GIB
    labels = [item.label for item in lora.gpu]
    assert "weights (frozen)" in labels and "LoRA optimizer" in labels and "gradients" not in labels
    shape = load_config(RECIPE).model.planned_shape()[0]
    adapters, unknown = lora_parameters(shape, ("q_proj", "v_proj", "mystery"), 16)
    assert unknown == ["mystery"]
    assert adapters == 36 * 16 * ((4096 + 32 * 128) + (4096 + 8 * 128))
    full_time = _time_check(full).need
    assert _time_check(lora).need <= full_time


def test_the_shape_comes_from_the_models_config_json(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    shape = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128}
    (folder / "config.json").write_text(json.dumps({**shape, "vocab_size": 1000}))
    found, source = load_config(RECIPE, [f"model.path={folder}"]).model.planned_shape()
    assert found.num_hidden_layers == 2 and source == f"config.json at model.path {folder}"


@pytest.mark.parametrize("phase", ["sft", "grpo"])
def test_fp32_training_is_timed_at_a_quarter_of_the_rate(phase):
    bf16 = _time_check(_plans()[phase]).need
    notes = " ".join(_plans(["model.dtype=float32"])[phase].notes)
    assert "x 1/4 (fp32)" in notes and bf16 >= 1
