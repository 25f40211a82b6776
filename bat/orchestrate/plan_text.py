"""The resource plan as text (`bat config plan`): the model line, then per job its request, its needs item by item,
each check with `ok` or `DOES NOT FIT`, and notes. Reads nothing; `render_plan` returns the text."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bat.orchestrate.plan import Check, PhasePlan
from bat.orchestrate.plan_memory import GIB, Item, total

if TYPE_CHECKING:
    from bat.config.model_shape import ModelShape


def _request(plan: PhasePlan) -> str:
    res = plan.resources
    hours, minutes = divmod(res.time_min, 60)
    nodes = f"{res.nodes} node{'s' if res.nodes > 1 else ''}"
    return (
        f"partition {res.partition or '(default)'}, {nodes}, {res.gpus} GPUs/node, "
        f"{res.cpus} CPUs x {plan.tasks} tasks = {res.cpus * plan.tasks} CPUs/node, {res.mem_gb:g} GiB/node, "
        f"time {hours}:{minutes:02d}:00, launcher {res.launcher}"
    )


def _items(items: list[Item]) -> list[str]:
    return [f"      {i.label:<20} {i.bytes / GIB:8.2f} GiB  {i.detail}".rstrip() for i in items]


def _check(check: Check) -> str:
    verdict = "ok" if check.ok else "DOES NOT FIT"
    return f"    {check.what}: {check.numbers()}  {verdict}"


def _phase(plan: PhasePlan) -> list[str]:
    lines = [f"{plan.phase}", f"  asks  {_request(plan)}"]
    if plan.gpu:
        lines += [f"  GPU memory per GPU: {total(plan.gpu) / GIB:.2f} GiB", *_items(plan.gpu)]
    lines += [f"  host memory per node: {total(plan.host) / GIB:.2f} GiB", *_items(plan.host)]
    lines.append(f"  CPUs per node: {plan.busy} busy process{'es' if plan.busy > 1 else ''}")
    lines += [_check(c) for c in plan.checks]
    lines += [f"    problem: {p}" for p in plan.config_problems]
    lines += [f"    note: {n}" for n in plan.notes]
    return lines


def _model(shape: ModelShape, source: str) -> str:
    return (
        f"model: {shape.parameter_count():,} parameters, {shape.num_hidden_layers} layers, hidden "
        f"{shape.hidden_size}, {shape.num_attention_heads} heads / {shape.kv_heads} KV heads x {shape.head_width}, "
        f"intermediate {shape.intermediate_size}, vocab {shape.vocab_size} (from {source})"
    )


def render_plan(shape: ModelShape, source: str, plans: list[PhasePlan], executor: str) -> str:
    """The whole plan; the last line says whether every job fits."""
    lines = [
        _model(shape, source),
        f"executor: {executor} (the plan is the Slurm request's, whatever the executor)",
        "",
    ]
    for plan in plans:
        lines += [*_phase(plan), ""]
    problems = [p for plan in plans for p in plan.problems]
    if problems:
        lines.append(f"DOES NOT FIT: {len(problems)} problem(s)")
        lines += [f"  {p}" for p in problems]
    else:
        lines.append(f"fits: all {len(plans)} jobs ({', '.join(p.phase for p in plans)})")
    return "\n".join(lines)
