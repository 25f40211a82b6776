"""`bat config plan` for the inference server bat starts on a phase's GPUs: weights and KV cache per GPU under tensor
parallelism, GPUs used by tensor x data parallel copies (the 9B recipe and variants of it)."""

from __future__ import annotations

from pathlib import Path

from bat.config import load_config
from bat.orchestrate.plan import plan_phase, plan_problems, plan_run

RECIPE = str(Path(__file__).resolve().parents[2] / "configs" / "cluster" / "qwen9b_8xgpu.yaml")


def _check(plan, what: str):
    return next(c for c in plan.checks if c.what == what)


def test_the_recipe_serves_eight_copies_on_eight_gpus():
    config = load_config(RECIPE)
    assert config.rollout.engine == "vllm" and plan_problems(config) == []
    shape, _, _ = plan_run(config)
    rollout = plan_phase(config, shape, "rollout")
    assert any("vLLM on 8 of the 8 GPUs (8 copies x tensor parallel 1)" in note for note in rollout.notes)
    share = _check(rollout, "vLLM share of each GPU")
    assert share.ok and share.limit == 0.85 * 80 * 2**30
    host = {item.label: item.bytes for item in rollout.host}
    assert host["vLLM processes"] == 8 * 4 * 2**30  # one GPU worker per copy


def test_tensor_parallel_splits_weights_and_kv_cache_per_gpu():
    one = load_config(RECIPE)
    two = load_config(RECIPE, ["rollout.vllm.tensor_parallel_size=2", "rollout.vllm.data_parallel_size=4"])
    shape = plan_run(one)[0]
    need_one = _check(plan_phase(one, shape, "rollout"), "vLLM share of each GPU").need
    plan_two = plan_phase(two, shape, "rollout")
    need_two = _check(plan_two, "vLLM share of each GPU").need
    weights = shape.parameter_count() * 2  # bf16
    kv = 8192 * 2 * shape.num_hidden_layers * shape.kv_heads * shape.head_width * 2
    assert abs((need_one - need_two) - (weights + kv) / 2) < 1e3  # half of both moves to the other GPU
    assert any("(4 copies x tensor parallel 2)" in note for note in plan_two.notes)


def test_more_server_gpus_than_the_phase_asks_is_refused_naming_the_numbers():
    config = load_config(RECIPE, ["rollout.vllm.tensor_parallel_size=2", "rollout.vllm.data_parallel_size=8"])
    problems = plan_problems(config)
    assert any(
        p.startswith("rollout: rollout.vllm.tensor_parallel_size 2 x data_parallel_size 8 = 16 GPUs") for p in problems
    )
    assert any(p.startswith("evaluate: ") and "phase asks gpus=8" in p for p in problems)


def test_a_share_too_small_for_the_weights_does_not_fit():
    config = load_config(RECIPE, ["rollout.vllm.gpu_memory_utilization=0.2"])
    assert any(p.startswith("rollout: vLLM share of each GPU needs") for p in plan_problems(config))


def test_sglang_is_planned_like_vllm_with_its_own_memory_fraction():
    config = load_config(RECIPE, ["rollout.engine=sglang", "rollout.sglang.mem_fraction_static=0.5"])
    shape = plan_run(config)[0]
    rollout = plan_phase(config, shape, "rollout")
    share = _check(rollout, "SGLang share of each GPU")
    assert share.ok and share.limit == 0.5 * 80 * 2**30 and "rollout.sglang.mem_fraction_static 0.5" in share.source
    assert any("SGLang on 8 of the 8 GPUs (8 copies x tensor parallel 1)" in note for note in rollout.notes)
    cpu_only = load_config(RECIPE, ["rollout.engine=sglang", "orchestrate.resources.rollout.gpus=0"])
    assert any(p.startswith("rollout: rollout.engine=sglang starts SGLang") for p in plan_problems(cpu_only))
