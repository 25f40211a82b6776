"""The time plan (`bat config plan`): per phase, its work from the config's sizes, divided by a throughput, against
the time it asks for. Reads the config; writes nothing (`bat.perf.machine.measure_cpu_gflops` measures a CPU rate).

Work, at the configured worst case (every sequence at its length limit), with N the policy's parameters:
* sft: `steps x global_batch x max_seq_len` tokens at 6N FLOPs each (8N with activation checkpointing: one more
  forward; LoRA trains no weight gradients of the frozen base: 4N, 6N), on `gpus x nodes` GPUs at
  `rates.gpu_tflops x rates.train_mfu` (a quarter of it in fp32);
* grpo: `grpo.steps x curriculum.batch_size x rollout.k` rollouts of `min(grpo.max_seq_len, max_context_tokens)`
  tokens, the same FLOPs plus 2N for a checkpoint KL reference's forward;
* rollout, evaluate, final_test: generated tokens (`curriculum.batches_per_round x batch_size x k` rollouts, or the
  split's tracks x repeats runs; round 0 evaluates the base policy and the SFT export) of at most
  `min(max_response_tokens, max_context_tokens)` each, at `rates.serve_tokens_per_s` per serving GPU scaled by 9e9 / N
  (decoding is bound by reading the weights), or 2N FLOPs a token on the job's CPUs without GPUs;
* route: the KL check, `kl_prompts x 6N x (rates.probe_prompt_tokens + kl_new_tokens)` FLOPs (the candidate samples,
  then both models score), on `cpus x rates.cpu_gflops`.
Every phase resumes from its own files after a timeout (step checkpoints, shards, runs, KL chunks), so a phase may
span `orchestrate.max_timeouts + 1` allocations of `time_min` less `signal_delay_s`; one that needs more does not fit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bat.config.model_shape import ModelShape
    from bat.config.root import BatConfig
    from bat.orchestrate.plan import PhasePlan

REFERENCE_PARAMS = 9e9
"""The model size `rates.serve_tokens_per_s` is stated for."""


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def _train_flops(config: BatConfig, phase: str, params: int) -> tuple[float, str]:
    """FLOPs of a whole SFT or GRPO job and how they were counted."""
    tc = config.sft if phase == "sft" else config.grpo
    per_token = (4 if tc.lora.enabled else 6) + (2 if tc.deepspeed.activation_checkpointing else 0)
    if phase == "sft":
        tokens = tc.steps * tc.global_batch * tc.max_seq_len
        work = f"{tc.steps} steps x {tc.global_batch} x {tc.max_seq_len} tokens"
    else:
        seq = min(tc.max_seq_len, config.rollout.budgets.max_context_tokens)
        rollouts = config.curriculum.batch_size * config.rollout.k
        tokens = tc.steps * rollouts * seq
        work = f"{tc.steps} steps x {rollouts} rollouts x {seq} tokens"
        if tc.kl_coef > 0 and tc.kl_reference == "checkpoint":
            per_token += 2
    return tokens * per_token * params, f"{work} x {per_token}N FLOPs"


def _generated(config: BatConfig, phase: str) -> tuple[int, str]:
    """Generated tokens of a rollout or evaluation job at the length limit, and how they were counted."""
    budgets, bench = config.rollout.budgets, config.benchmark
    per = min(budgets.max_response_tokens, budgets.max_context_tokens)
    if phase == "rollout":
        count = config.curriculum.batches_per_round * config.curriculum.batch_size * config.rollout.k
        return count * per, f"{count} rollouts x {per} tokens"
    splits = ("controller",) if phase == "evaluate" else ("final", "test")
    runs = sum(len(bench.tracks) * bench.split_repeats.get(s, bench.repeats) for s in splits)
    copies = 2 if phase == "evaluate" else 1
    where = "round 0: base + SFT, " if copies == 2 else ""
    return copies * runs * per, f"{where}{copies * runs} runs x {per} tokens"


def _serving_seconds(config: BatConfig, plan: PhasePlan, params: int, cpu: tuple[float, str]) -> tuple[float, str]:
    tokens, work = _generated(config, plan.phase)
    res, rc, rates = plan.resources, config.rollout, config.orchestrate.rates
    if res.gpus and rc.engine in ("vllm", "sglang"):
        section = rc.vllm if rc.engine == "vllm" else rc.sglang
        gpus = min(res.gpus, section.tensor_parallel_size * section.data_parallel_size)
        rate = gpus * rates.serve_tokens_per_s * REFERENCE_PARAMS / params
        return tokens / rate, f"{work}; {gpus} GPUs x {rates.serve_tokens_per_s:g} tokens/s at 9B (stated)"
    flops = res.cpus * plan.tasks * cpu[0] * 1e9
    return tokens * 2 * params / flops, f"{work} x 2N FLOPs; {res.cpus} CPUs x {cpu[0]:g} GFLOP/s ({cpu[1]})"


def phase_seconds(config: BatConfig, shape: ModelShape, plan: PhasePlan, cpu: tuple[float, str]) -> tuple[float, str]:
    """(seconds, how) of one phase's work; (0, reason) for a phase whose time is not estimated."""
    params, res, rates = shape.parameter_count(), plan.resources, config.orchestrate.rates
    if plan.phase in ("sft", "grpo"):
        flops, work = _train_flops(config, plan.phase, params)
        precision = (config.sft if plan.phase == "sft" else config.grpo).deepspeed.precision or config.model.dtype
        quarter = 0.25 if precision in ("fp32", "float32") else 1.0
        if not res.gpus:
            rate = res.cpus * plan.tasks * cpu[0] * 1e9
            return flops / rate, f"{work}; {res.cpus * plan.tasks} CPUs x {cpu[0]:g} GFLOP/s ({cpu[1]})"
        gpus = res.gpus * res.nodes
        rate = gpus * rates.gpu_tflops * 1e12 * rates.train_mfu * quarter
        fp32 = " x 1/4 (fp32)" if quarter < 1 else ""
        return (
            flops / rate,
            f"{work}; {gpus} GPUs x {rates.gpu_tflops:g} TFLOP/s x MFU {rates.train_mfu:g}{fp32} (stated)",
        )
    if plan.phase in ("rollout", "evaluate", "final_test"):
        if plan.phase != "rollout" and config.evaluate.agent != "policy":
            return 0.0, "a scripted agent: not estimated"
        return _serving_seconds(config, plan, params, cpu)
    if plan.phase == "route":
        fb = config.curriculum.fallback
        if not fb.kl_enabled:
            return 0.0, "no KL check (curriculum.fallback.kl_enabled false)"
        tokens = rates.probe_prompt_tokens + fb.kl_new_tokens
        flops = fb.kl_prompts * 6 * params * tokens
        work = f"KL check: {fb.kl_prompts} prompts x 6N x {tokens} tokens"
        return flops / (res.cpus * cpu[0] * 1e9), f"{work}; {res.cpus} CPUs x {cpu[0]:g} GFLOP/s ({cpu[1]})"
    return 0.0, "not estimated (no model work)"


@dataclass
class TimePlan:
    """A phase's time check: allocations it needs against those it may use, and the notes that explain it."""

    what: str = ""
    needed: int = 0
    allowed: int = 0
    limit: str = ""
    notes: list[str] = field(default_factory=list)


def time_plan(config: BatConfig, shape: ModelShape, plan: PhasePlan, cpu_rate: tuple[float, str] | None) -> TimePlan:
    """The phase's time check (`needed` 0 when its time is not estimated) and its notes."""
    if plan.phase in config.orchestrate.phase_overrides:
        return TimePlan()
    orch = config.orchestrate
    cpu = cpu_rate or (orch.rates.cpu_gflops, "stated: orchestrate.rates.cpu_gflops")
    seconds, how = phase_seconds(config, shape, plan, cpu)
    if not seconds:
        return TimePlan(notes=[f"time: {how}"])
    usable = max(plan.resources.time_min * 60 - orch.signal_delay_s, 60)
    needed, allowed = math.ceil(seconds / usable), orch.max_timeouts + 1
    result = TimePlan(
        f"time ~{_hours(seconds)}: allocations",
        needed,
        allowed,
        f"time_min {plan.resources.time_min}, max_timeouts {orch.max_timeouts}",
        [f"time: ~{_hours(seconds)} = {how}"],
    )
    if 1 < needed <= allowed:
        result.notes.append(f"time: spans {needed} allocations of {plan.resources.time_min} min (resumes after each)")
    return result
