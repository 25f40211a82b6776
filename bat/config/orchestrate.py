"""Orchestration knobs: executor, per-phase Slurm resources, container, preemption handling."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from bat.config.base import Section
from bat.config.rates import RatesConfig
from bat.phase.order import PHASE_NAMES


class PhaseResources(Section):
    """Slurm resources of one phase's job (ignored by the local and debug executors except `time_min`)."""

    partition: str | None = None
    """Slurm partition (`--partition`); None = the cluster default."""
    nodes: int = Field(1, ge=1, le=1024)
    """Nodes (`--nodes`); >1 only with `launcher: tasks` (DeepSpeed/torchrun under srun)."""
    gpus: int = Field(0, ge=0, le=16)
    """GPUs per node (`--gpus-per-node`)."""
    cpus: int = Field(1, ge=1, le=512)
    """CPUs per task (`--cpus-per-task`)."""
    mem_gb: float = Field(2.0, gt=0, le=4096)
    """Memory per node in GiB (`--mem`)."""
    time_min: int = Field(30, ge=1, le=14 * 24 * 60)
    """Wall-time limit in minutes (`--time`); timeouts requeue at most `max_timeouts` times."""
    launcher: Literal["single", "tasks"] = "single"
    """`single`: one process per job; `tasks`: one srun task per GPU (ranks from submitit.JobEnvironment)."""
    additional: dict[str, str | int] = Field(default_factory=dict)
    """Extra sbatch options without the leading dashes (e.g. `{"account": "lab", "qos": "high"}`)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables exported in this phase's job before Python starts (local and Slurm executors; passed
    into the container too), e.g. `{NCCL_DEBUG: INFO}`, or a pin of the CPU math libraries to one instruction set so
    that a phase rebuilt on another x86 CPU kind computes bit-identical numbers: `{MKL_CBWR: "AVX2,STRICT",
    ATEN_CPU_CAPABILITY: avx2, ONEDNN_MAX_CPU_ISA: AVX2}` (a job whose env pins an MKL_CBWR branch also preloads
    `bat.orchestrate.mkl_vendor`'s shim, without which MKL ignores the branch on CPUs that are not Intel's)."""
    gpu_mem_gb: float | None = Field(None, gt=0, le=4096)
    """Memory of one GPU of this phase's partition in GiB, for `bat config plan` only (not an sbatch option);
    None = `orchestrate.gpu_mem_gb`."""
    node_cpus: int | None = Field(None, ge=1, le=100_000)
    """CPUs of one node of this phase's partition, for `bat config plan` only; None = `orchestrate.node_cpus`."""
    node_mem_gb: float | None = Field(None, gt=0, le=1_048_576)
    """Memory of one node of this phase's partition in GiB, for `bat config plan` only; None =
    `orchestrate.node_mem_gb`."""

    @field_validator("env")
    @classmethod
    def _check_env(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not name or name[0].isdigit() or not all(c.isalnum() or c == "_" for c in name):
                raise ValueError(f"env name {name!r} is not an environment variable name (A-Z, a-z, 0-9, _)")
        return value

    @model_validator(mode="after")
    def _check_nodes(self) -> PhaseResources:
        if self.nodes > 1 and self.launcher != "tasks":
            raise ValueError(f"nodes={self.nodes} needs launcher='tasks' (got launcher={self.launcher!r})")
        return self


def _default_resources() -> dict[str, PhaseResources]:
    cpu = PhaseResources(cpus=1, mem_gb=2.0, time_min=30)
    gpu = PhaseResources(gpus=0, cpus=2, mem_gb=8.0, time_min=60)
    return {
        "synthesize": cpu,
        "scan": cpu,
        "sft": gpu,
        "rollout": gpu,
        "verify": cpu,
        "grpo": gpu,
        "evaluate": gpu,
        "route": cpu,
        "final_test": gpu,
        "driver": PhaseResources(cpus=1, mem_gb=1.0, time_min=15),
    }


class ContainerConfig(Section):
    """Run phases inside an Apptainer image (`apptainer exec --nv --containall --bind ...`).

    Every path the config names is bound at the same path (the state dir, `model.path`, `model.cache_dir`,
    `leakage.index_path`, `sandbox.code_paths`, the environments of `rollout.vllm.python`, `rollout.sglang.python` and
    `sandbox.python`, the folder of a `rollout.sglang.launcher` script), node-local `scratch` over /tmp, plus `binds`;
    they must be absolute and exist on the host (checked before queueing). Slurm commands inside the container (the
    route queueing the next round, submitit's requeue on USR2) are relayed to the job's host side, which runs them
    with the site's own Slurm client (docs/cluster.md)."""

    enabled: bool = False
    """Wrap every phase's python in `apptainer exec` (needs Apptainer on the compute nodes)."""
    image: str = "containers/bat.sif"
    """Path of the .sif image built by `containers/build.sh`; absolute when `enabled` (jobs run from other
    directories)."""
    apptainer: str = "apptainer"
    """Apptainer (or singularity) executable on the compute nodes (a name on PATH or an absolute path)."""
    nv: bool = True
    """Pass `--nv` (bind the host NVIDIA driver)."""
    scratch: str = "${SLURM_TMPDIR:-/tmp}"
    """Node-local scratch bound over /tmp in the container (shell-expanded in the job); HF_HOME and the Slurm
    relay's folder live here."""
    binds: list[str] = Field(default_factory=list)
    """Extra binds `src[:dst[:opts]]` (e.g. a dataset folder; the paths named above are bound already); `src`
    absolute and existing on the host."""
    python: str = "python"
    """Python executable inside the image (submitit must be installed there)."""
    slurm_relay: bool = True
    """Relay `sbatch scontrol squeue sacct scancel sinfo srun` from inside the container to the job's host side (the
    route queues the next round, USR2 requeues). False: the image must reach Slurm itself (the site binds its
    Slurm client, libslurm, config and munge socket through `binds`; docs/cluster.md)."""
    pass_env: list[str] = Field(
        default_factory=lambda: ["SLURM_*", "SUBMITIT_*", "BAT_*", "CUDA_VISIBLE_DEVICES", "NCCL_*", "OMP_NUM_THREADS"]
    )
    """Names (bash glob patterns) of the job's environment variables passed into the container, which
    `--containall` otherwise empties: submitit needs `SLURM_*` (job id, tasks, restart count)."""

    @field_validator("pass_env")
    @classmethod
    def _check_pass_env(cls, value: list[str]) -> list[str]:
        for name in value:
            if not name or not all(c.isalnum() or c in "_*?" for c in name):
                raise ValueError(f"pass_env entry {name!r} is not a variable name or a glob of one (A-Z, 0-9, _, *, ?)")
        return value


class OrchestrateConfig(Section):
    """How phases are queued and run: executor, resources, container, preemption."""

    executor: Literal["auto", "slurm", "local", "debug"] = "local"
    """`slurm` (sbatch), `local` (subprocesses, one phase at a time), `debug` (in-process), `auto` (slurm if sbatch exists)."""
    resources: dict[str, PhaseResources] = Field(default_factory=_default_resources)
    """Per-phase resources keyed by phase name (plus `driver` for run_round.sh); missing keys use the defaults."""
    gpu_mem_gb: float = Field(80.0, gt=0, le=4096)
    """Memory of one GPU in GiB (e.g. 80 for A100/H100 80GB, 40 for A100 40GB, 141 for H200): what
    `bat config plan` compares each phase's GPU memory need with (per phase: `resources.<phase>.gpu_mem_gb`)."""
    node_cpus: int = Field(128, ge=1, le=100_000)
    """CPUs of one compute node (`sinfo -o %c`): the plan refuses a phase asking more per node (cpus x tasks)
    than a node has (Slurm would never start it); per phase: `resources.<phase>.node_cpus`."""
    node_mem_gb: float = Field(1024.0, gt=0, le=1_048_576)
    """Memory of one compute node in GiB (`sinfo -o %m`, MiB / 1024): the plan refuses a phase asking more
    `mem_gb`; per phase: `resources.<phase>.node_mem_gb`."""
    rates: RatesConfig = Field(default_factory=RatesConfig)
    """Throughputs the time plan of `bat config plan` divides each phase's work by (stated; `bat.config.rates`)."""
    container: ContainerConfig = Field(default_factory=ContainerConfig)
    """Apptainer wrapping of phase jobs."""
    signal_delay_s: int = Field(90, ge=1, le=3600)
    """Seconds before the time limit at which Slurm sends USR2 (flush + requeue)."""
    max_timeouts: int = Field(3, ge=0, le=100)
    """Requeues allowed after timeouts (preemptions requeue without limit)."""
    sigterm_flush: bool = True
    """On SIGTERM (preemption on clusters that send only SIGTERM, or `scancel`) run the flush hooks and exit;
    Slurm requeues preempted jobs (`--requeue`) and the phase resumes from disk; a cancelled job stays cancelled."""
    lease_ttl_s: int = Field(600, ge=5, le=7 * 24 * 3600)
    """A driver lease not renewed for this long is stale and may be taken over."""
    poll_s: float = Field(2.0, gt=0, le=600)
    """Seconds between job-state polls when waiting for jobs."""
    bank_refresh: bool = False
    """Queue an asynchronous bank refresh (synthesize -> scan, CPU resources) beside every round r >= 1."""
    phase_overrides: dict[str, str] = Field(default_factory=dict)
    """Phase -> `module:function` replacing the product table entry (tests, experiments)."""

    @field_validator("resources", mode="before")
    @classmethod
    def _fill_resources(cls, value: object) -> object:
        """Merge each given phase entry field by field over that phase's defaults."""
        if not isinstance(value, dict):
            return value
        valid = (*PHASE_NAMES, "driver")
        unknown = sorted(set(value) - set(valid))
        if unknown:
            raise ValueError(f"unknown resources key(s) {unknown}; valid: {list(valid)}")
        merged: dict[str, object] = {k: v.model_dump() for k, v in _default_resources().items()}
        for key, entry in value.items():
            if isinstance(entry, PhaseResources):
                merged[key] = entry
            elif isinstance(entry, dict):
                merged[key] = {**merged[key], **entry}
            else:
                merged[key] = entry  # let pydantic report the bad type
        return merged

    @field_validator("phase_overrides")
    @classmethod
    def _check_overrides(cls, value: dict[str, str]) -> dict[str, str]:
        for phase, target in value.items():
            if phase not in PHASE_NAMES:
                raise ValueError(f"phase_overrides: unknown phase {phase!r}; valid: {list(PHASE_NAMES)}")
            module, sep, func = target.partition(":")
            if not sep or not module or not func.isidentifier():
                raise ValueError(f"phase_overrides.{phase}={target!r} is not 'module:function'")
        return value
