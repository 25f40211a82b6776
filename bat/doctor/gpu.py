"""GPUs visible to this process, their memory against the resource plan, and the driver against torch's CUDA build
(`bat doctor`). Reads `nvidia-smi`, the installed torch's `torch.version.cuda` and the plan (`bat.orchestrate.plan.plan_run`); writes nothing. Run it inside a GPU job to see a compute node."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bat.doctor.finding import Finding, last_line, ok, problem, run_command, unused

if TYPE_CHECKING:
    from bat.config.root import BatConfig

QUERY = ["nvidia-smi", "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"]
MIB = 2**20
GIB = 2**30


def parse_gpus(csv: str) -> list[tuple[str, str, float]]:
    """(index, name, memory in GiB) per line of `nvidia-smi --query-gpu=index,name,memory.total` (MiB)."""
    gpus = []
    for line in csv.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[2].replace(".", "", 1).isdigit():
            gpus.append((parts[0], parts[1], float(parts[2]) * MIB / GIB))
    return gpus


def driver_cuda(banner: str) -> str | None:
    """The highest CUDA version the driver supports, from `nvidia-smi`'s banner (`CUDA Version: 13.0`)."""
    found = re.search(r"CUDA Version:\s*([0-9]+\.[0-9]+)", banner)
    return found.group(1) if found else None


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:2])


def largest_gpu_need(config: BatConfig) -> tuple[float, str]:
    """The plan's largest per-GPU need in GiB and its phase; (0, '') when no phase uses a GPU or no shape is known."""
    from bat.orchestrate.plan import plan_run
    from bat.orchestrate.plan_memory import total

    try:
        _, _, plans = plan_run(config)
    except ValueError:
        return 0.0, ""
    needs = [(total(p.gpu) / GIB, p.phase) for p in plans if p.gpu]
    return max(needs) if needs else (0.0, "")


def torch_cuda() -> str | None:
    """The CUDA version the installed torch was built for; None for a CPU build or no torch."""
    try:
        import torch
    except ImportError:
        return None
    return torch.version.cuda


def check_gpus(config: BatConfig) -> list[Finding]:
    """GPUs visible and each one's memory against `orchestrate.gpu_mem_gb` and the plan; `unused` when no phase asks
    for a GPU."""
    asked = {phase: res.gpus for phase, res in config.orchestrate.resources.items() if res.gpus}
    if not asked:
        return [unused("gpus", "no phase asks for a GPU (orchestrate.resources.<phase>.gpus)")]
    ran = run_command(QUERY)
    if ran is None or ran.code != 0:
        why = "nvidia-smi is not on PATH" if ran is None else f"nvidia-smi failed: {last_line(ran.output)}"
        return [
            problem(
                "gpus",
                f"no GPU visible ({why}); {', '.join(sorted(asked))} ask for GPUs",
                "run bat doctor inside a GPU job of the phase's partition, e.g. `srun -p PARTITION --gpus=1 "
                ".venv/bin/bat doctor --config FILE` (login nodes have none)",
            )
        ]
    gpus = parse_gpus(ran.output)
    if not gpus:
        return [problem("gpus", f"nvidia-smi lists no GPU: {last_line(ran.output)}", "check CUDA_VISIBLE_DEVICES")]
    findings = []
    smallest = min(mem for _, _, mem in gpus)
    names = ", ".join(sorted({name for _, name, _ in gpus}))
    need, phase = largest_gpu_need(config)
    said = config.orchestrate.gpu_mem_gb
    seen = f"{len(gpus)} GPU(s): {names}, smallest {smallest:.1f} GiB; the plan assumes {said:g} GiB"
    if need:
        seen += f" and needs {need:.1f} GiB per GPU at most ({phase})"
    if smallest < need:
        fix = (
            f"set orchestrate.gpu_mem_gb to {smallest:.0f} and follow `bat config plan` (tensor parallel, ZeRO stage, "
            "activation checkpointing), or use a partition with larger GPUs"
        )
        findings.append(problem("gpu memory", seen, fix))
    elif smallest + 0.5 < said:
        findings.append(
            problem("gpu memory", seen, f"orchestrate.gpu_mem_gb {said:g} is more than this GPU has; lower it")
        )
    else:
        findings.append(ok("gpu memory", seen))
    findings.append(_driver_vs_torch())
    return findings


def _driver_vs_torch() -> Finding:
    banner = run_command(["nvidia-smi"])
    supported = driver_cuda(banner.output) if banner else None
    built = torch_cuda()
    if built is None:
        return problem(
            "cuda build",
            "the installed torch is a CPU build (torch.version.cuda is None)",
            "run the phases in the image (orchestrate.container.enabled) or install the CUDA build of the torch pin "
            "from PyPI in the job's environment",
        )
    if supported and _version(supported) < _version(built):
        return problem(
            "cuda build",
            f"torch is built for CUDA {built}, the driver supports up to CUDA {supported}",
            "ask the site for a newer NVIDIA driver, or pin a torch built for an older CUDA",
        )
    return ok("cuda build", f"torch built for CUDA {built}; driver supports CUDA {supported or '?'}")
