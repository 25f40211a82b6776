"""DeepSpeed glue: process-group setup from torchrun/srun env, engine with AdamW (or SGD) + warmup-cosine schedule.

Launch: one process per rank via `torchrun --nproc-per-node N -m bat.cli.main train ...` or
`srun python -m bat.cli.main train ...` (SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID are mapped to
RANK/WORLD_SIZE/LOCAL_RANK; MASTER_ADDR defaults to the first host of the job). A plain single process
runs as a 1-rank group. Backend: gloo on CPU, nccl on GPU (`DeepSpeedConfig.backend`).
"""

from __future__ import annotations

import math
import os
import subprocess
from dataclasses import dataclass
from typing import Any

from bat.config.deepspeed import DeepSpeedConfig, training_precision
from bat.train.kernels import warm_optimizer_kernels


@dataclass(frozen=True)
class DistEnv:
    """This process's place in the job: global rank, world size, local rank."""

    rank: int
    world: int
    local_rank: int

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def _first_slurm_host() -> str:
    nodelist = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST")
    if not nodelist:
        return "127.0.0.1"
    try:
        out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=True)
        return out.stdout.split()[0]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return nodelist.split(",")[0]


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def dist_env(master_port: int) -> DistEnv:
    """Read rank/world from torchrun (RANK...) or srun (SLURM_PROCID...) env; fill missing rendezvous vars.

    A lone process (no launcher env) rendezvouses on a free local port; srun ranks share `master_port`."""
    if "RANK" not in os.environ and "SLURM_PROCID" in os.environ and "SLURM_NTASKS" in os.environ:
        os.environ["RANK"] = os.environ["SLURM_PROCID"]
        os.environ["WORLD_SIZE"] = os.environ["SLURM_NTASKS"]
        os.environ["LOCAL_RANK"] = os.environ.get("SLURM_LOCALID", "0")
        os.environ.setdefault("MASTER_ADDR", _first_slurm_host())
    if os.environ.get("WORLD_SIZE", "1") == "1" and "MASTER_PORT" not in os.environ:
        master_port = _free_port()
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(master_port))
    return DistEnv(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"]))


def resolve_backend(cfg: DeepSpeedConfig) -> str:
    """`gloo` or `nccl`; `auto` picks nccl only when CUDA is available."""
    import torch

    if cfg.backend != "auto":
        if cfg.backend == "nccl" and not torch.cuda.is_available():
            raise ValueError("deepspeed.backend='nccl' needs CUDA; valid on this machine: ['auto', 'gloo']")
        return cfg.backend
    return "nccl" if torch.cuda.is_available() else "gloo"


def init_distributed(cfg: DeepSpeedConfig) -> DistEnv:
    """Join (or create) the process group; idempotent. Returns this process's DistEnv."""
    import deepspeed
    import torch.distributed as dist

    lone = "MASTER_PORT" not in os.environ and os.environ.get("WORLD_SIZE", "1") == "1"
    env = dist_env(cfg.master_port)
    if not dist.is_initialized():
        from bat.train.extension_locks import reap_stale_locks

        with reap_stale_locks():  # DeepSpeed JIT-loads its CPU comm op here; a killed job's lock would hang us
            deepspeed.init_distributed(dist_backend=resolve_backend(cfg), verbose=False)
    if lone:  # the port is bound by this process now; children must not inherit it
        os.environ.pop("MASTER_PORT", None)
    return env


def device_for(env: DistEnv) -> Any:
    import torch

    if torch.cuda.is_available():
        torch.cuda.set_device(env.local_rank)
        return torch.device("cuda", env.local_rank)
    return torch.device("cpu")


def warmup_cosine(total_steps: int, warmup_ratio: float, min_lr_ratio: float):
    """lr multiplier(step): linear warmup over ceil(ratio*total) steps, then cosine down to `min_lr_ratio`."""
    warmup = math.ceil(warmup_ratio * total_steps)

    def factor(step: int) -> float:
        if warmup and step < warmup:
            return (step + 1) / warmup
        span = max(total_steps - warmup, 1)
        progress = min(max(step - warmup, 0) / span, 1.0)
        return min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))

    return factor


def resolve_precision(cfg: DeepSpeedConfig, dtype: str, where: str) -> str:
    """The precision (`fp32`/`bf16`/`fp16`) a trainer runs a policy loaded in `dtype` (`model.dtype`) with
    (`bat.config.deepspeed.training_precision`), checked against this machine before anything is loaded: fp16 is
    accepted only with CUDA (DeepSpeed 0.19 refuses it on a CPU without fp16 kernels, "Type fp16 is not supported on
    your device"; CPUs that have them are untested). bf16 runs on the CPU. Raises ValueError listing the dtypes
    valid here."""
    import torch

    precision = training_precision(cfg, dtype, where)
    if precision == "fp16" and not torch.cuda.is_available():
        raise ValueError(
            "model.dtype=float16 (DeepSpeed fp16) trains only on CUDA GPUs; valid on this machine (no CUDA): "
            "['float32', 'bfloat16']"
        )
    return precision


def ds_config(cfg: DeepSpeedConfig, grad_accum: int, grad_clip: float, precision: str) -> dict[str, Any]:
    """The DeepSpeed JSON config from our typed section and the resolved `precision` (`resolve_precision`): bf16 or
    fp16 enable DeepSpeed's mixed precision (16-bit weights and gradients, fp32 master weights and AdamW state in
    its optimizer wrapper); fp32 enables neither."""
    zero: dict[str, Any] = {"stage": cfg.zero_stage}
    if cfg.offload_optimizer and cfg.zero_stage > 0:
        zero["offload_optimizer"] = {"device": "cpu"}
    return {
        "train_micro_batch_size_per_gpu": cfg.micro_batch_per_rank,
        "gradient_accumulation_steps": grad_accum,
        "gradient_clipping": grad_clip,
        "zero_optimization": zero,
        "bf16": {"enabled": precision == "bf16"},
        "fp16": {"enabled": precision == "fp16"},
        "zero_allow_untested_optimizer": True,
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
    }


def _no_cache_while_training(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """Forward pre-hook: a training forward never builds a KV cache (it would keep every layer's keys and values
    alive, which activation checkpointing exists to drop); eval forwards keep the caller's choice."""
    if module.training:
        kwargs["use_cache"] = False
    return args, kwargs


def prepare_training_model(model: Any, cfg: DeepSpeedConfig) -> Any:
    """Turn on activation checkpointing when `cfg.activation_checkpointing` (non-reentrant, per decoder layer) and
    make every training forward run with `use_cache=False`; the saved config (`use_cache`) is left as it was.
    Changes `model` in place and returns it."""
    if cfg.activation_checkpointing:
        # transformers 5's name for `gradient_checkpointing_enable` (deprecated there)
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    model.register_forward_pre_hook(_no_cache_while_training, with_kwargs=True)
    return model


def build_engine(
    model: Any,
    cfg: DeepSpeedConfig,
    *,
    precision: str,
    lr: float,
    weight_decay: float,
    grad_clip: float,
    grad_accum: int,
    total_steps: int,
    warmup_ratio: float,
    min_lr_ratio: float,
    optimizer: str = "adamw",
) -> Any:
    """Wrap `model` in a DeepSpeed engine with a torch optimizer (`adamw`, or `sgd`: plain steps without momentum)
    and a LambdaLR warmup-cosine schedule, in `precision` (`resolve_precision`; DeepSpeed casts the module's
    parameters to it); sets up the model for training first (`prepare_training_model`)."""
    import deepspeed
    import torch

    prepare_training_model(model, cfg)
    params = [p for p in model.parameters() if p.requires_grad]
    warm_optimizer_kernels()
    if optimizer == "adamw":
        opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, betas=(0.9, 0.999), eps=1e-8)
    elif optimizer == "sgd":
        opt = torch.optim.SGD(params, lr=lr, weight_decay=weight_decay, momentum=0.0)
    else:
        raise ValueError(f"unknown optimizer {optimizer!r}; valid: adamw, sgd")
    scheduler = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(total_steps, warmup_ratio, min_lr_ratio))
    config = ds_config(cfg, grad_accum, grad_clip, precision)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, lr_scheduler=scheduler, config=config)
    return engine


def grad_norm(engine: Any) -> float:
    """Global gradient norm of the last step (before clipping); call right after `engine.step()`."""
    value = engine.get_global_grad_norm()
    if value is None:
        value = getattr(engine, "_bat_grad_norm", None)
    return float(value) if value is not None else float("nan")


def record_grad_norm(engine: Any) -> None:
    """Stage 0 keeps no norm: compute it from the (already all-reduced) grads before `engine.step()`."""
    import torch

    if engine.zero_optimization_stage() == 0 and engine.is_gradient_accumulation_boundary():
        grads = [p.grad for p in engine.module.parameters() if p.grad is not None]
        engine._bat_grad_norm = float(torch.nn.utils.get_total_norm(grads)) if grads else 0.0


def barrier() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier()
