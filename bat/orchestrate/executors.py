"""submitit executors from config: slurm, local, debug or auto; per-phase resources; container hook."""

from __future__ import annotations

import shlex
import shutil
from typing import TYPE_CHECKING, Any

import submitit

from bat.orchestrate import mkl_vendor
from bat.orchestrate.container import submitit_python
from bat.orchestrate.graph import PHASES
from bat.state.layout import RunLayout

if TYPE_CHECKING:
    from bat.config.root import BatConfig

EXECUTOR_KINDS = ("auto", "slurm", "local", "debug")


def executor_kind(config: BatConfig) -> str:
    """Concrete executor: `auto` becomes `slurm` when `sbatch` is on PATH, else `local`."""
    kind = config.orchestrate.executor
    if kind not in EXECUTOR_KINDS:
        raise ValueError(f"orchestrate.executor={kind!r}; valid: {list(EXECUTOR_KINDS)}")
    if kind == "auto":
        return "slurm" if shutil.which("sbatch") else "local"
    return kind


def phase_resources(config: BatConfig, phase: str):
    """The `orchestrate.resources` entry a phase's job runs under (`driver` for run_round.sh's own job)."""
    if phase not in PHASES and phase != "driver":
        raise KeyError(f"unknown phase {phase!r}; valid: {sorted(PHASES)} or 'driver'")
    return config.orchestrate.resources[PHASES[phase].resources if phase in PHASES else "driver"]


def mkl_vendor_setup(env: dict[str, str]) -> list[str]:
    """Shell lines that hold a pinned MKL branch (`MKL_CBWR=AVX2,...` in `env`) whatever the job inherits
    (`mkl_vendor.branch_pin_lines`), then preload `bat.orchestrate.mkl_vendor`'s shim so that the pin holds on CPUs
    that are not Intel's (MKL ignores it there otherwise); builds the shim on first use. Without a C compiler the pin
    holds on Intel CPUs only, and a warning says so."""
    if not mkl_vendor.pins_a_branch(env):
        return []
    lines = mkl_vendor.branch_pin_lines(env)
    path, why = mkl_vendor.ensure_shim()
    if path is None:
        if why not in _WARNED:
            _WARNED.add(why)
            print(f"bat: WARNING: MKL_CBWR={env['MKL_CBWR']} holds on Intel CPUs only: the MKL vendor shim: {why}")
        return lines
    return [*lines, f"export LD_PRELOAD={shlex.quote(str(path))}${{LD_PRELOAD:+:$LD_PRELOAD}}"]


_WARNED: set[str] = set()


def resource_parameters(config: BatConfig, phase: str, kind: str, round_index: int = 0) -> dict[str, Any]:
    """submitit parameters for `phase` (generic + `slurm_`-prefixed) from `orchestrate.resources`.

    Job names are `<run>.rNN.<phase>` so `squeue`/`sacct` show which round and phase a job is.
    """
    orch = config.orchestrate
    res = phase_resources(config, phase)
    tasks = res.gpus if res.launcher == "tasks" and res.gpus > 0 else 1
    params: dict[str, Any] = {"timeout_min": res.time_min, "name": f"{config.run.name}.r{round_index:02d}.{phase}"}
    if kind == "local":
        params["tasks_per_node"] = tasks
        if res.gpus:
            params["gpus_per_node"] = res.gpus
    if res.env and kind in ("local", "slurm"):  # run in the job's shell before its Python starts
        params[f"{kind}_setup"] = [f"export {name}={shlex.quote(value)}" for name, value in sorted(res.env.items())]
        if not config.orchestrate.container.enabled:  # an image carries its own libraries (and shim, if any)
            params[f"{kind}_setup"] += mkl_vendor_setup(res.env)
    if kind == "slurm":
        params.update(
            mem_gb=res.mem_gb,
            cpus_per_task=res.cpus,
            nodes=res.nodes,
            tasks_per_node=tasks,
            slurm_signal_delay_s=orch.signal_delay_s,
        )
        if res.gpus:
            params["gpus_per_node"] = res.gpus
        if res.partition:
            params["slurm_partition"] = res.partition
        extra: dict[str, Any] = {"kill-on-invalid-dep": "yes", "requeue": True, **res.additional}
        params["slurm_additional_parameters"] = extra
    return params


def driver_sbatch_flags(config: BatConfig) -> list[str]:
    """`sbatch` flags asking for the driver job's resources (`orchestrate.resources.driver`), for
    `sbatch $(bat config sbatch CONFIG) run_round.sh`; flags on sbatch's command line override the script's
    `#SBATCH` defaults."""
    res = config.orchestrate.resources["driver"]
    flags = [
        f"--job-name={config.run.name}.driver",
        f"--time={res.time_min}",
        f"--cpus-per-task={res.cpus}",
        f"--mem={max(1, round(res.mem_gb * 1024))}M",
    ]
    if res.partition:
        flags.append(f"--partition={res.partition}")
    if res.gpus:
        flags.append(f"--gpus-per-node={res.gpus}")
    flags += [f"--{key}={value}" for key, value in sorted(res.additional.items())]
    return flags


def make_executor(
    config: BatConfig, layout: RunLayout, round_index: int, phase: str, dependency: list[str] | None = None
) -> submitit.Executor:
    """An executor whose jobs log under `jobs/round_NN/<phase>/<job id>`; `dependency` = afterok job ids."""
    kind = executor_kind(config)
    folder = layout.submitit_dir(round_index, phase) / "%j"
    init: dict[str, Any] = {}
    if kind in ("slurm", "local"):
        init[f"{kind}_max_num_timeout"] = config.orchestrate.max_timeouts
    if kind == "slurm" and config.orchestrate.container.enabled:
        pass_env = sorted(phase_resources(config, phase).env)
        init["slurm_python"] = submitit_python(config, layout, extra_pass_env=pass_env)
    executor = submitit.AutoExecutor(folder=folder, cluster=kind, **init)
    params = resource_parameters(config, phase, kind, round_index)
    if dependency and kind == "slurm":
        params["slurm_dependency"] = "afterok:" + ":".join(dependency)
    executor.update_parameters(**params)
    return executor
