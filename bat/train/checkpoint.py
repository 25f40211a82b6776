"""Resumable step checkpoints (DeepSpeed engine state + per-rank RNG + data cursor) and HF export.

Layout: `<root>/step_NNNNNN/` holds DeepSpeed's files (weights, optimizer, scheduler, client state),
`rng_rank<R>.pt` per rank, and `meta.json` written last by rank 0 (`bat.state.checkpoints`): a step
directory without it is ignored and pruned. All ranks write into `<root>/.step_NNNNNN.partial/`, which
rank 0 renames into place after a barrier (a shared filesystem is assumed for multi-node runs).

A model that trains LoRA adapters (`bat.train.lora`) checkpoints only its trainable (adapter) weights and their
optimizer state, and resumes them onto the frozen base it loaded from the model folder; its export is the merged full
model plus the adapter under `bat.state.checkpoints.adapter_dir`.
"""

from __future__ import annotations

import contextlib
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bat.state.atomic import atomic_dir, atomic_write_json
from bat.state.checkpoints import EXPORT_META_NAME, META_NAME, CheckpointStore, adapter_dir, step_name
from bat.train.engine import DistEnv, barrier
from bat.train.lora import is_adapted, load_trainable, merged_state_dict, save_adapter, trainable_state_only


def _rng_state() -> dict[str, Any]:
    import numpy as np
    import torch

    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    import numpy as np
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_step(
    engine: Any,
    store: CheckpointStore,
    step: int,
    env: DistEnv,
    *,
    client_state: dict[str, Any],
    meta: dict[str, Any],
    keep: int,
) -> Path:
    """Collective: write step `step` (engine + RNG + `client_state`), mark it valid, keep the newest `keep`.
    A LoRA engine writes its adapters and their optimizer state only (the frozen base is left out)."""
    import torch

    root = Path(store.root)
    partial_tag = f".{step_name(step)}.partial"
    partial = root / partial_tag
    if env.is_main:
        shutil.rmtree(partial, ignore_errors=True)
        shutil.rmtree(store.path(step), ignore_errors=True)
        root.mkdir(parents=True, exist_ok=True)
    barrier()
    adapted = is_adapted(engine.module)
    with trainable_state_only(engine.module) if adapted else contextlib.nullcontext():
        engine.save_checkpoint(
            str(root), tag=partial_tag, client_state=client_state, save_latest=False, exclude_frozen_parameters=adapted
        )
    torch.save(_rng_state(), partial / f"rng_rank{env.rank}.pt")
    barrier()
    if env.is_main:
        partial.rename(store.path(step))
        atomic_write_json(store.path(step) / META_NAME, {"step": step, **meta})
        store.prune(keep)
    barrier()
    return store.path(step)


def load_latest(
    engine: Any,
    store: CheckpointStore,
    env: DistEnv,
    check_meta: Callable[[dict[str, Any], Path], None] | None = None,
    *,
    dtype: str | None = None,
) -> tuple[int, dict[str, Any]] | None:
    """Collective: restore the newest valid step into `engine` and this rank's RNG; returns (step, client_state).

    `check_meta(meta, step_dir)` may refuse the step (raise) before anything is loaded; so is a step whose `meta.json`
    records another `dtype` (`model.dtype`: DeepSpeed's fp32 and bf16 optimizer states do not load into each other).
    A LoRA engine loads exactly its adapters (`bat.train.lora.load_trainable`) onto the base it already holds."""
    import torch

    latest = store.latest()
    if latest is None:
        return None
    step, path = latest
    meta = store.meta(step)
    saved = meta.get("dtype")
    if dtype is not None and saved is not None and saved != dtype:
        raise ValueError(
            f"step checkpoint {path} was trained with model.dtype={saved}, this run has model.dtype={dtype}; "
            f"valid: resume with model.dtype={saved}, or start over after removing {path.parent}"
        )
    if check_meta is not None:
        check_meta(meta, path)
    loaded, client_state = engine.load_checkpoint(
        str(path.parent),
        tag=path.name,
        load_optimizer_states=True,
        load_lr_scheduler_states=True,
        custom_load_fn=load_trainable if is_adapted(engine.module) else None,
    )
    if loaded is None:
        raise RuntimeError(f"DeepSpeed could not load checkpoint {path}")
    rng_file = path / f"rng_rank{env.rank}.pt"
    if not rng_file.exists():
        raise FileNotFoundError(f"{rng_file} missing: checkpoint {path} was written by a different world size")
    _set_rng_state(torch.load(rng_file, weights_only=False))
    return step, dict(client_state or {})


def _cpu_state(module: Any) -> dict[str, Any]:
    """CPU copy of `module`'s state dict."""
    return {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}


def _in_dtype(state: dict[str, Any], dtype: str) -> dict[str, Any]:
    """`state` with every floating-point tensor in `dtype` (a torch dtype name); integer buffers are kept."""
    from bat.policy.loader import torch_dtype

    target = torch_dtype(dtype)
    return {k: v.to(target) if v.is_floating_point() else v for k, v in state.items()}


def export_hf(
    engine: Any,
    tokenizer: Any,
    out_dir: str | Path,
    env: DistEnv,
    *,
    dtype: str = "float32",
    extra: dict[str, Any] | None = None,
) -> Path:
    """Collective: write the engine's current weights in `dtype` (`model.dtype`) as an HF safetensors directory
    (atomically, rank 0), with `bat_export.json` recording `extra` and the dtype (`config.json`'s `dtype` is the
    trained module's, which is `dtype` when the engine trains in its precision). A LoRA engine writes the merged
    full model (`bat.train.lora.merged_state_dict`; the training model is unchanged) and its adapter under
    `adapter_dir(out_dir)`."""
    import deepspeed

    module = engine.module
    out = Path(out_dir)
    params = list(module.parameters())
    gather = engine.zero_optimization_stage() == 3
    ctx = deepspeed.zero.GatheredParameters(params, modifier_rank=None) if gather else contextlib.nullcontext()
    with ctx:
        if env.is_main:
            adapted = is_adapted(module)
            hf_model = module.get_base_model() if adapted else module
            state = _in_dtype(merged_state_dict(module) if adapted else _cpu_state(module), dtype)
            with atomic_dir(out) as tmp:
                hf_model.save_pretrained(tmp, state_dict=state, safe_serialization=True)
                if adapted:
                    save_adapter(module, adapter_dir(tmp), _cpu_state(module))
                tokenizer.save_pretrained(tmp)
                atomic_write_json(tmp / EXPORT_META_NAME, {**(extra or {}), "dtype": dtype})
    barrier()
    return out
