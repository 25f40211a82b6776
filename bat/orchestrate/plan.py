"""The resource plan (`bat config plan`): per phase, what it asks Slurm for and what it needs, before anything is
queued. Reads the config and, when `model.path` exists, its `config.json`; writes nothing.

What a phase asks for comes from `orchestrate.resources.<phase>` exactly as `bat.orchestrate.executors` turns it
into sbatch options: `--nodes`, `--gpus-per-node=gpus`, `--mem=mem_gb` (per node), `--cpus-per-task=cpus` and
`--ntasks-per-node` = gpus with `launcher: tasks` (one srun task, i.e. one DeepSpeed rank, per GPU), else 1. So a
node gives a phase `cpus x tasks` CPUs and `mem_gb` of memory shared by its tasks, and a `launcher: single` job runs
one process whatever its GPU count.

What a phase needs is estimated per GPU (the busiest one), per node (host memory) and in CPUs, with the formulas of
`bat.orchestrate.plan_memory` on the policy's shape (`ModelConfig.planned_shape`), at the configured worst case
(every sequence at its length limit). A phase does not fit when its GPU need exceeds the GPU memory
(`orchestrate.gpu_mem_gb`, per phase `resources.<phase>.gpu_mem_gb`), its host need exceeds its `mem_gb`, or its
request exceeds a node (`node_cpus`, `node_mem_gb`: Slurm would never start it). More busy processes than CPUs
only slows a phase down: noted, not refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bat.config.deepspeed import training_precision
from bat.config.model_shape import ModelShape
from bat.orchestrate.graph import PHASES
from bat.orchestrate.plan_memory import (
    CUDA_RUNTIME_BYTES,
    GIB,
    PRECISION_BYTES,
    Item,
    activations,
    kv_bytes_per_token,
    layer_activation_bytes,
    logits,
    lora_parameters,
    lora_training_state,
    total,
    training_state,
    zero_buffers,
)
from bat.orchestrate.plan_time import time_plan

if TYPE_CHECKING:
    from bat.config.orchestrate import PhaseResources
    from bat.config.root import BatConfig

PLAN_PHASES = (*PHASES, "driver")
"""Every job a run queues: the phase graph's phases and the driver job that `run_round.sh` is."""

PROCESS_HOST_BYTES = 1 * GIB
"""A phase process that imports torch and transformers, on the host (measured ~0.3 GiB RSS on CPU; rounded up)."""
GPU_PROCESS_HOST_BYTES = 4 * GIB
"""A process that drives a GPU, on the host: CUDA libraries and the host side of its context (an approximation)."""
DRIVER_HOST_BYTES = 0.25 * GIB
"""The driver job (`run_round.sh` -> `jobs/launch.py`): measured ~40 MiB RSS; rounded up."""
KL_BATCH = 8
"""Probe prompts scored at once by the route's KL check (`bat.train.kl_estimate.estimate_kl`'s batch size)."""
VLLM_RUNTIME_BYTES = 1 * GIB
"""vLLM's own GPU overhead besides weights, KV cache and the profiled activations (CUDA context, sampler)."""
MIB = 2**20


@dataclass(frozen=True)
class Check:
    """One need compared with what the request or the node gives."""

    what: str
    need: float
    limit: float
    source: str
    unit: str = "GiB"
    verb: str = "needs"
    """`needs` for an estimate, `asks` for a request checked against a node."""

    @property
    def ok(self) -> bool:
        return self.need <= self.limit

    def numbers(self) -> str:
        """`needs X GiB, has Y GiB (source)`, in GiB or CPUs."""
        if self.unit == "GiB":
            return f"{self.verb} {self.need / GIB:.1f} GiB, has {self.limit / GIB:.1f} GiB ({self.source})"
        return f"{self.verb} {self.need:g} {self.unit}, has {self.limit:g} ({self.source})"


@dataclass
class PhasePlan:
    """What one phase asks for and needs; `problems` lists why it cannot run as configured."""

    phase: str
    resources: PhaseResources
    tasks: int
    gpu: list[Item] = field(default_factory=list)
    """Memory of the busiest GPU."""
    host: list[Item] = field(default_factory=list)
    """Host memory of one node."""
    busy: int = 1
    """Processes working at once on a node."""
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    config_problems: list[str] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        """Every failed check and config problem, each naming the phase and its numbers."""
        failed = [f"{self.phase}: {c.what} {c.numbers()}" for c in self.checks if not c.ok]
        return failed + [f"{self.phase}: {p}" for p in self.config_problems]


def _tasks(res: PhaseResources) -> int:
    """Tasks per node exactly as `bat.orchestrate.executors.resource_parameters` asks for them."""
    return res.gpus if res.launcher == "tasks" and res.gpus > 0 else 1


def _training(config: BatConfig, shape: ModelShape, plan: PhasePlan) -> None:
    """SFT or GRPO: ZeRO state, buffers, activations and logits per rank; host per node."""
    res, tasks = plan.resources, plan.tasks
    tc = config.sft if plan.phase == "sft" else config.grpo
    ds, params, budgets = tc.deepspeed, shape.parameter_count(), config.rollout.budgets
    world, micro = tasks * res.nodes, tc.deepspeed.micro_batch_per_rank
    dtype = config.model.dtype  # the policy, its KL reference copy and the export are loaded/written in it
    precision, load_bytes = training_precision(ds, dtype), params * PRECISION_BYTES[dtype]
    if plan.phase == "sft":
        seq, targets = tc.max_seq_len, tc.max_seq_len
        where = "every position may be a target" if tc.target_logits_only else "target_logits_only off: every position"
    else:
        seq = min(tc.max_seq_len, budgets.max_context_tokens)  # a rollout never outgrows its context budget
        targets = min(seq, budgets.max_response_tokens) if tc.target_logits_only else seq
        where = "generated tokens" if tc.target_logits_only else "target_logits_only off: every position"
    if tc.lora.enabled:
        adapters, unknown = lora_parameters(shape, tc.lora.target_modules, tc.lora.r)
        state, offload_host = lora_training_state(
            params, adapters, precision, ds.zero_stage, world, ds.offload_optimizer
        )
        if unknown:
            plan.notes.append(f"{plan.phase}.lora.target_modules {unknown}: not a Llama/Qwen projection, counted as 0")
    else:
        state, offload_host = training_state(params, precision, ds.zero_stage, world, ds.offload_optimizer)
    items = [
        *state,
        zero_buffers(params, precision, ds.zero_stage, world),
        activations(shape, micro * seq, precision, ds.activation_checkpointing),
        logits(shape, micro * targets, precision, f"{micro} x {targets} positions ({where}) x vocab"),
    ]
    if plan.phase == "grpo" and tc.kl_coef > 0 and tc.kl_reference == "checkpoint":
        items.append(Item("KL reference", load_bytes, f"model.dtype {dtype} copy of the start checkpoint per rank"))
    ranks = f"{tasks} rank{'s' if tasks > 1 else ''}"
    if res.gpus > 0:
        plan.gpu = [*items, Item("CUDA runtime", CUDA_RUNTIME_BYTES, "context, NCCL")]
        plan.host = [
            Item("processes", tasks * GPU_PROCESS_HOST_BYTES, f"{ranks} x {GPU_PROCESS_HOST_BYTES / GIB:g} GiB"),
            Item("checkpoint load", tasks * load_bytes, f"{ranks} load it in model.dtype {dtype} first"),
        ]
    else:
        plan.host = [Item("process", tasks * PROCESS_HOST_BYTES, ranks)]
        plan.host += [Item(i.label, i.bytes * tasks, f"{i.detail}; {ranks}") for i in items]
    if offload_host:
        plan.host.append(Item("offloaded optimizer", tasks * offload_host, f"AdamW state + fp32 gradients; {ranks}"))
    plan.busy = tasks
    if res.gpus > tasks:
        plan.notes.append(f"launcher {res.launcher}: {tasks} process uses 1 of the {res.gpus} GPUs")
    if ds.backend == "nccl" and res.gpus == 0:
        plan.config_problems.append(f"{plan.phase}.deepspeed.backend=nccl needs GPUs, but the phase asks gpus=0")
    batch = tc.global_batch if plan.phase == "sft" else (tc.minibatch if tc.step_batches == "shuffle" else None)
    key = "sft.global_batch" if plan.phase == "sft" else "grpo.minibatch"
    if batch is not None and batch % (micro * world):
        plan.config_problems.append(
            f"{key}={batch} is not a multiple of micro_batch_per_rank ({micro}) x ranks ({world}); "
            f"valid: {[micro * world * k for k in range(1, 5)]}"
        )


def _engine(config: BatConfig, shape: ModelShape, plan: PhasePlan) -> tuple[list[Item], list[Item]]:
    """The generating engine of rollout/evaluate: (items on the busiest GPU, items on the host)."""
    rc, res = config.rollout, plan.resources
    params, ctx = shape.parameter_count(), rc.budgets.max_context_tokens
    weights = Item("weights", params * PRECISION_BYTES[rc.dtype], f"rollout.dtype {rc.dtype}")
    per_sequence = ctx * kv_bytes_per_token(shape, rc.dtype)
    on_cuda = rc.device.startswith("cuda")
    probe = {"vllm": rc.vllm, "sglang": rc.sglang}.get(rc.engine, rc.openai).verify_checkpoint
    probe_items = (
        [Item("probe copy", weights.bytes, f"checkpoint check on rollout.device {rc.device}")] if probe else []
    )
    if rc.engine == "hf":
        live = rc.states_per_shard * rc.k if plan.phase == "rollout" else config.evaluate.parallel_runs
        items = [
            weights,
            Item("KV cache", live * per_sequence, f"{live} live sequences x {ctx} tokens"),
            Item("prefill", layer_activation_bytes(shape, ctx, rc.dtype), f"one layer over {ctx} tokens"),
        ]
        return (items, []) if on_cuda else ([], items)
    if rc.engine == "openai":
        plan.notes.append(f"engine openai: the server at {rc.openai.base_url} is started outside bat and not counted")
        return (probe_items, []) if on_cuda else ([], probe_items)
    if rc.engine == "sglang" and res.gpus == 0:
        plan.config_problems.append(
            "rollout.engine=sglang starts SGLang on the phase's GPUs, but the phase asks gpus=0; valid: gpus >= "
            "rollout.sglang.tensor_parallel_size x data_parallel_size, or engine hf / vllm on the CPU"
        )
        return [], probe_items
    if res.gpus == 0:
        plan.busy += 1
        kv = rc.vllm.cpu_kvcache_gib * GIB
        plan.checks.append(Check("vLLM KV space for one sequence", per_sequence, kv, "rollout.vllm.cpu_kvcache_gib"))
        host = [weights, Item("KV cache", kv, "rollout.vllm.cpu_kvcache_gib"), *probe_items]
        return [], [Item("vLLM process", PROCESS_HOST_BYTES), *host]
    gpu, host = _managed_server(config, shape, plan, weights.bytes)
    return gpu + (probe_items if on_cuda else []), host + ([] if on_cuda else probe_items)


def _managed_server(
    config: BatConfig, shape: ModelShape, plan: PhasePlan, weight_bytes: float
) -> tuple[list[Item], list[Item]]:
    """The server bat starts on the phase's GPUs (`rollout.vllm` or `rollout.sglang`): `data_parallel_size` copies of
    the model, each split over `tensor_parallel_size` GPUs. Per GPU it reserves its share (vLLM's
    `gpu_memory_utilization`, SGLang's `mem_fraction_static` x GPU), which must hold 1/tp of the weights, the profiled prefill activations (not split: an upper bound) and 1/tp of one
    full-context sequence's KV cache (kv heads split over tp, at least one per GPU). Returns the busiest GPU's items
    and the host's (one worker process per GPU); adds the check, a note on how many sequences the rest holds, and a config problem when tp x dp > the phase's GPUs."""
    rc, res = config.rollout, plan.resources
    label, key, section, fraction, fraction_key, scheduled = _server_settings(config)
    tp, dp = section.tensor_parallel_size, section.data_parallel_size
    used = tp * dp
    if used > res.gpus:
        plan.config_problems.append(
            f"{key}.tensor_parallel_size {tp} x data_parallel_size {dp} = {used} GPUs, but the phase asks "
            f"gpus={res.gpus}; valid: tensor x data parallel <= {res.gpus}"
        )
    share = fraction * _gpu_mem(config, plan)[0]
    heads_per_gpu = max(shape.kv_heads / tp, 1)
    per_sequence = rc.budgets.max_context_tokens * kv_bytes_per_token(shape, rc.dtype) * heads_per_gpu / shape.kv_heads
    batched = max(rc.budgets.max_context_tokens, 8192)  # whole-prompt prefill: max-num-batched-tokens
    runtime = VLLM_RUNTIME_BYTES + layer_activation_bytes(shape, batched, rc.dtype)
    split = f", 1/{tp} per GPU (tensor parallel {tp})" if tp > 1 else ""
    items = [
        Item("weights", weight_bytes / tp, f"rollout.dtype {rc.dtype}{split}"),
        Item("runtime", runtime, f"prefill of {batched} tokens + context"),
        Item("KV cache", per_sequence, f"one {rc.budgets.max_context_tokens}-token sequence{split}"),
    ]
    fits = int(max(share - total(items[:2]), 0) // per_sequence)
    copies = f"{dp} cop{'y' if dp == 1 else 'ies'} x tensor parallel {tp}"
    plan.notes.append(
        f"{label} on {used} of the {res.gpus} GPUs ({copies}): each GPU's {share / GIB:.1f} GiB share holds "
        f"{fits} full-context sequences per copy, {fits * dp} in all ({scheduled} per copy)"
    )
    source = f"{key}.{fraction_key} {fraction:g} x GPU"
    plan.checks.append(Check(f"{label} share of each GPU", total(items), share, source))
    plan.busy += used
    host = [Item(f"{label} processes", used * GPU_PROCESS_HOST_BYTES, f"{used} GPU workers")]
    return [Item(f"{label} reservation", share, source)], host


def _server_settings(config: BatConfig) -> tuple[str, str, Any, float, str, str]:
    """The managed server of `rollout.engine` (vllm or sglang): its label, config key, config section, memory
    fraction, the fraction's field name and what it schedules at once per copy."""
    rc = config.rollout
    if rc.engine == "sglang":
        sg = rc.sglang
        fraction = sg.mem_fraction_static
        return (
            "SGLang",
            "rollout.sglang",
            sg,
            fraction,
            "mem_fraction_static",
            f"max_running_requests {sg.max_running_requests}",
        )
    vl = rc.vllm
    fraction = vl.gpu_memory_utilization
    return "vLLM", "rollout.vllm", vl, fraction, "gpu_memory_utilization", f"max_num_seqs {vl.max_num_seqs}"


def sandboxed(config: BatConfig) -> bool:
    """Whether tool calls go through `bat.sandbox` (`benchmark.runtime: sandbox` on the built-in benchmark; a plug-in
    benchmark runs its own tools)."""
    return config.benchmark.runtime == "sandbox" and config.benchmark.name == "builtin"


def _serving(config: BatConfig, shape: ModelShape, plan: PhasePlan) -> None:
    """rollout, evaluate, final_test: the engine, the phase process and its concurrent sandboxed tool calls."""
    rc = config.rollout
    scripted = plan.phase != "rollout" and config.evaluate.agent != "policy"
    gpu, host = ([], []) if scripted else _engine(config, shape, plan)
    uses_gpu = bool(gpu) and rc.engine not in ("vllm", "sglang")
    process = GPU_PROCESS_HOST_BYTES if uses_gpu else PROCESS_HOST_BYTES
    plan.host = [Item("process", process), *host]
    if sandboxed(config):
        calls = rc.tool_workers * config.sandbox.memory_mb * MIB
        detail = f"{rc.tool_workers} at once x sandbox.memory_mb {config.sandbox.memory_mb} (RLIMIT_AS, a bound)"
        plan.host.append(Item("tool calls", calls, detail))
        plan.busy += rc.tool_workers
    plan.gpu = [*gpu, Item("CUDA runtime", CUDA_RUNTIME_BYTES, "context")] if uses_gpu else gpu
    if scripted:
        plan.notes.append(f"evaluate.agent {config.evaluate.agent}: a scripted agent, no model loaded")
    elif not gpu and plan.resources.gpus:
        plan.notes.append(f"asks {plan.resources.gpus} GPUs; nothing bat runs in this job uses them")


def _route(config: BatConfig, shape: ModelShape, plan: PhasePlan) -> None:
    """route: the fallback rule's KL check loads the candidate and the best checkpoint on the CPU in `model.dtype`
    (`bat.train.kl_estimate`); its KV cache and full-length logits are in that dtype too."""
    plan.host = [Item("process", PROCESS_HOST_BYTES)]
    fallback, dtype = config.curriculum.fallback, config.model.dtype
    if fallback.kl_enabled:
        params, ctx = shape.parameter_count(), config.rollout.budgets.max_context_tokens
        generate = KL_BATCH * (ctx + fallback.kl_new_tokens) * kv_bytes_per_token(shape, dtype)
        score = 2 * KL_BATCH * ctx * shape.vocab_size * PRECISION_BYTES[dtype]
        plan.host += [
            Item("KL models", 2 * params * PRECISION_BYTES[dtype], f"candidate + best, model.dtype {dtype} on the CPU"),
            Item("KL scoring", max(generate, score), f"{KL_BATCH} prompts of up to {ctx} tokens, both models' logits"),
        ]
    if plan.resources.gpus:
        plan.notes.append(f"asks {plan.resources.gpus} GPUs; the KL check runs on the CPU")


def _light(config: BatConfig, shape: ModelShape, plan: PhasePlan) -> None:
    """synthesize, scan, verify, driver: no model; worker processes and their sandboxed tool calls."""
    if plan.phase == "driver":
        plan.host = [Item("process", DRIVER_HOST_BYTES)]
        return
    workers = config.bank.workers if plan.phase == "synthesize" else 1
    plan.host = [Item("processes", workers * PROCESS_HOST_BYTES, f"{workers} x {PROCESS_HOST_BYTES / GIB:g} GiB")]
    plan.busy = workers
    if plan.phase == "synthesize" and sandboxed(config):
        mb = config.sandbox.memory_mb
        plan.host.append(Item("tool calls", workers * mb * MIB, f"{workers} x sandbox.memory_mb {mb} (RLIMIT_AS)"))


BUILDERS = {"sft": _training, "grpo": _training, "rollout": _serving, "evaluate": _serving, "final_test": _serving}
BUILDERS["route"] = _route


def _gpu_mem(config: BatConfig, plan: PhasePlan) -> tuple[float, str]:
    res = plan.resources
    if res.gpu_mem_gb is not None:
        return res.gpu_mem_gb * GIB, f"orchestrate.resources.{plan.phase}.gpu_mem_gb"
    return config.orchestrate.gpu_mem_gb * GIB, "orchestrate.gpu_mem_gb"


def _add_checks(config: BatConfig, plan: PhasePlan) -> None:
    """GPU memory per GPU, host memory per node, and the request against one node."""
    res, orch, key = plan.resources, config.orchestrate, f"orchestrate.resources.{plan.phase}"
    if plan.gpu and res.gpus == 0:
        plan.config_problems.append("needs a GPU (rollout.device is cuda) but asks gpus=0")
    elif plan.gpu:
        plan.checks.insert(0, Check("GPU memory per GPU", total(plan.gpu), *_gpu_mem(config, plan)))
    plan.checks.append(Check("host memory per node", total(plan.host), res.mem_gb * GIB, f"{key}.mem_gb"))
    node_mem = (
        (res.node_mem_gb, f"{key}.node_mem_gb") if res.node_mem_gb else (orch.node_mem_gb, "orchestrate.node_mem_gb")
    )
    plan.checks.append(Check("mem_gb per node", res.mem_gb * GIB, node_mem[0] * GIB, node_mem[1], verb="asks"))
    node_cpus = (res.node_cpus, f"{key}.node_cpus") if res.node_cpus else (orch.node_cpus, "orchestrate.node_cpus")
    asked = res.cpus * plan.tasks
    what = f"CPUs per node (cpus {res.cpus} x {plan.tasks} tasks)"
    plan.checks.append(Check(what, asked, node_cpus[0], node_cpus[1], "CPUs", verb="asks"))
    if plan.busy > asked:
        plan.notes.append(f"{plan.busy} busy processes on {asked} CPUs: slower, not refused")


def plan_phase(config: BatConfig, shape: ModelShape, phase: str) -> PhasePlan:
    """The plan of one phase (a phase of the graph or `driver`)."""
    key = PHASES[phase].resources if phase in PHASES else "driver"
    res = config.orchestrate.resources[key]
    plan = PhasePlan(phase, res, _tasks(res))
    override = config.orchestrate.phase_overrides.get(phase)
    if override:  # another function runs there: its needs are unknown, only the request is checked against a node
        plan.notes.append(f"runs {override} (orchestrate.phase_overrides): needs not estimated")
    else:
        BUILDERS.get(phase, _light)(config, shape, plan)
    _add_checks(config, plan)
    return plan


def plan_run(config: BatConfig, cpu_rate: tuple[float, str] | None = None) -> tuple[ModelShape, str, list[PhasePlan]]:
    """The policy's shape, where it came from, and every job's plan with its time check (`bat.orchestrate.plan_time`;
    `cpu_rate`: a measured (GFLOP/s per core, where) replacing `orchestrate.rates.cpu_gflops`); raises ValueError
    when no shape is known."""
    shape, source = config.model.planned_shape()
    plans = [plan_phase(config, shape, phase) for phase in PLAN_PHASES]
    for plan in plans:
        timed = time_plan(config, shape, plan, cpu_rate)
        if timed.needed:
            plan.checks.append(Check(timed.what, timed.needed, timed.allowed, timed.limit, "allocations"))
        plan.notes += timed.notes
    return shape, source, plans


def plan_problems(config: BatConfig) -> list[str]:
    """Every reason a job of this config cannot run as requested; [] when all fit."""
    try:
        _, _, plans = plan_run(config)
    except ValueError as exc:
        return [f"resource plan: {exc}"]
    return [problem for plan in plans for problem in plan.problems]
