"""LoRA adapters (peft) on a frozen base for SFT and GRPO (`sft.lora`, `grpo.lora`, `bat.config.lora`).

With `lora.enabled` the trainer wraps the loaded HF model with `wrap_lora` before building its DeepSpeed engine, so
only the adapters require grad and the optimizer holds only their state. What is saved where:

* step checkpoints (`bat.train.checkpoint.save_step`): only the adapters and their optimizer/scheduler state
  (DeepSpeed `exclude_frozen_parameters`); the step's `meta.json` records the base's digest (`AdapterBase`), and a
  resume refuses a base whose digest differs (`check_resume`) because the adapters only mean something on it;
* the phase export (`bat.train.checkpoint.export_hf`): the merged full HF model (`merged_state_dict`, the arithmetic
  of peft's `merge_and_unload`, W + alpha / r * B @ A, without touching the training model), which every engine and
  evaluation loads unchanged, plus the adapter itself (`adapter_config.json`, `adapter_model.safetensors`) under
  `bat.state.checkpoints.adapter_dir(export)`.

Adapters are created afresh on every run of a phase (B = 0, so the wrapped model computes exactly the base), from
the torch RNG the trainer seeded: a GRPO block's adapters sit on the block's start checkpoint, never on an older
base.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bat.config.lora import LoraConfig
from bat.state.atomic import atomic_write_json, read_json
from bat.state.digest import sha256_path

BASE_KEY = "lora_base"
"""Key of the base's record (`AdapterBase.meta`) in a LoRA step checkpoint's `meta.json`."""


def linear_layer_names(model: Any) -> list[str]:
    """Sorted distinct last-dotted-part names of the `torch.nn.Linear` layers of `model` (what `target_modules`
    may name)."""
    import torch

    return sorted({name.rsplit(".", 1)[-1] for name, mod in model.named_modules() if isinstance(mod, torch.nn.Linear)})


def wrap_lora(model: Any, cfg: LoraConfig) -> Any:
    """`model` itself when `cfg.enabled` is off; else a peft `PeftModel` around it (the base frozen in place, one
    adapter per `cfg.target_modules` layer, B = 0). Raises ValueError naming the unknown targets and the valid
    linear layer names of `model`."""
    if not cfg.enabled:
        return model
    from peft import LoraConfig as PeftLoraConfig
    from peft import get_peft_model

    valid = linear_layer_names(model)
    unknown = [name for name in cfg.target_modules if name not in valid]
    if unknown:
        raise ValueError(f"lora.target_modules {unknown} are not linear layers of this model; valid names: {valid}")
    peft_cfg = PeftLoraConfig(
        r=cfg.r,
        lora_alpha=cfg.alpha,
        lora_dropout=cfg.dropout,
        target_modules=list(cfg.target_modules),
        bias="none",
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, peft_cfg)


def is_adapted(module: Any) -> bool:
    """Whether `module` (an engine's module) is a peft model, i.e. trains adapters on a frozen base (peft is not
    imported for this: without it imported nothing can be one)."""
    peft = sys.modules.get("peft")
    return peft is not None and isinstance(module, peft.PeftModel)


def trainable_names(module: Any) -> set[str]:
    """`module.state_dict()` names of the parameters that require grad (the adapters of a peft model)."""
    return {name for name, param in module.named_parameters(remove_duplicate=False) if param.requires_grad}


@contextlib.contextmanager
def trainable_state_only(module: Any) -> Iterator[None]:
    """While open, `module.state_dict()` holds only the parameters that require grad. DeepSpeed's
    `exclude_frozen_parameters` alone is not enough: it names each shared parameter once, so a frozen tied weight
    stays in under its second name (SmolLM2's `lm_head.weight`, the embedding, 113 MB of an adapter checkpoint)."""
    keep = trainable_names(module)

    def drop_frozen(_module: Any, state: dict[str, Any], prefix: str, _meta: Any) -> None:
        for key in [key for key in state if key.removeprefix(prefix) not in keep]:
            del state[key]

    handle = module.register_state_dict_post_hook(drop_frozen)
    try:
        yield
    finally:
        handle.remove()


def load_trainable(src: dict[str, Any], dst: Any) -> None:
    """DeepSpeed `custom_load_fn` for adapter-only checkpoints: copy `src` (saved with `exclude_frozen_parameters`)
    into `dst`, whose frozen base was loaded from the model folder. Raises RuntimeError unless `src` holds exactly
    the trainable parameters of `dst` (a checkpoint of another adapter shape, or a full one)."""
    wanted, given = trainable_names(dst), set(src)
    if wanted != given:
        raise RuntimeError(
            f"adapter checkpoint does not match the model's adapters: missing {sorted(wanted - given)[:5]}, "
            f"unexpected {sorted(given - wanted)[:5]} ({len(given)} saved, {len(wanted)} trainable); "
            "resume with the lora settings the checkpoint was written with, or remove its step directories"
        )
    result = dst.load_state_dict(src, strict=False)
    if result.unexpected_keys:
        raise RuntimeError(f"adapter checkpoint keys not in the model: {result.unexpected_keys[:5]}")


@dataclass(frozen=True)
class AdapterBase:
    """The frozen base a run's adapters are trained on: its folder and tree digest (`bat.state.digest`), recorded in
    every LoRA step checkpoint's `meta.json` under `BASE_KEY` and checked on resume (`check_resume`)."""

    path: str
    digest: str

    @classmethod
    def of(cls, model_path: str | Path) -> AdapterBase:
        """Digest the base folder `model_path` (reads every file in it once)."""
        return cls(str(model_path), sha256_path(model_path) or "")

    def meta(self) -> dict[str, Any]:
        """The `meta.json` entry of a step checkpoint trained on this base."""
        return {BASE_KEY: {"path": self.path, "digest": self.digest}}


def check_resume(meta: dict[str, Any], where: Path, *, base: AdapterBase | None) -> None:
    """Refuse to resume the step checkpoint `where` (its `meta`) when it does not fit this run: adapters onto another
    base than the one they were trained on (digests differ), adapters with `lora.enabled` off, or a full-model
    checkpoint with it on (`base` is this run's base, None without LoRA). Raises ValueError naming what differs."""
    saved = meta.get(BASE_KEY)
    start_over = f"or remove {where.parent} to start over"
    if saved is None and base is not None:
        raise ValueError(
            f"step checkpoint {where} holds a full model, not LoRA adapters; set lora.enabled=false {start_over}"
        )
    if saved is not None and base is None:
        raise ValueError(
            f"step checkpoint {where} holds LoRA adapters only; set lora.enabled=true with its settings {start_over}"
        )
    if saved is not None and base is not None and saved.get("digest") != base.digest:
        raise ValueError(
            f"step checkpoint {where} holds adapters trained on {saved.get('path')} (digest "
            f"{str(saved.get('digest'))[:16]}), but this run's base {base.path} has digest {base.digest[:16]}; "
            f"resume on the original base, {start_over}"
        )


def merged_state_dict(peft_model: Any) -> dict[str, Any]:
    """CPU copy of the base model's state dict with every adapter merged in (W + scaling * B @ A per adapted
    layer, peft's `merge_and_unload` arithmetic) under plain HF names; `peft_model` is left unchanged."""
    from peft.tuners.lora import LoraLayer

    base = peft_model.get_base_model()
    merged: dict[str, Any] = {}
    for name, module in base.named_modules():
        if isinstance(module, LoraLayer):
            weight = module.get_base_layer().weight.detach().clone()
            for adapter in module.active_adapters:
                weight += module.get_delta_weight(adapter).detach().to(weight.dtype)
            merged[f"{name}.weight"] = weight.cpu()
    state: dict[str, Any] = {}
    for key, value in base.state_dict().items():
        if ".lora_" in key:
            continue
        plain = key.replace(".base_layer.", ".")
        state[plain] = merged[plain] if plain in merged else value.detach().cpu().clone()
    return state


class AdaptersOff:
    """The base model under a peft model, as a callable model: its forward runs with every adapter disabled.

    Used as GRPO's KL reference with `grpo.kl_reference: checkpoint`: the adapters are created afresh on the block's
    start checkpoint (`wrap_lora`), whose weights stay frozen, so the model with adapters off is that start
    checkpoint exactly, and no second copy of it is loaded."""

    def __init__(self, peft_model: Any) -> None:
        self.peft_model = peft_model

    def get_base_model(self) -> Any:
        return self.peft_model.get_base_model()

    def __call__(self, **kwargs: Any) -> Any:
        with self.peft_model.disable_adapter():
            return self.peft_model(**kwargs)


ADAPTER_CONFIG = "adapter_config.json"
"""peft's adapter settings file in an adapter folder."""


def save_adapter(module: Any, folder: Path, state_dict: dict[str, Any]) -> None:
    """Write the peft model `module`'s adapter (`state_dict`, its adapter tensors on CPU) to `folder` as peft's
    `save_pretrained` does, without what names this machine: peft's template model card (README.md) is not kept and
    `adapter_config.json`'s `base_model_name_or_path` (the local path of the base it was loaded from) is cleared. The
    base an adapter belongs to is recorded by bat itself (the step's `AdapterBase`, a piece's digests)."""
    module.save_pretrained(folder, state_dict=state_dict)
    (Path(folder) / "README.md").unlink(missing_ok=True)
    config_file = Path(folder) / ADAPTER_CONFIG
    atomic_write_json(config_file, {**read_json(config_file), "base_model_name_or_path": None})


def write_merged_export(base: Path, adapter: Path, out: Path, *, dtype: str, meta: dict[str, Any]) -> Path:
    """Write the HF export `out` that a LoRA block's `export_hf` writes, from files alone: the export `base` with
    the peft adapter folder `adapter` (trained on `base`) merged in (`merged_state_dict`'s arithmetic, in float32,
    stored in `dtype`), `base`'s tokenizer and chat-template files, the adapter under `adapter_dir(out)` and `meta`
    as its export record. Written beside `out` and renamed (complete or absent); an existing export is kept."""
    import shutil

    import torch
    from peft import PeftModel

    from bat.policy.loader import load_model, torch_dtype
    from bat.state.atomic import atomic_write_json
    from bat.state.checkpoints import EXPORT_META_NAME, adapter_dir
    from bat.state.model_files import export_weights

    out = Path(out)
    if export_weights(out).exists():
        return out
    model = PeftModel.from_pretrained(load_model(base, dtype="float32"), str(adapter))
    target = torch_dtype(dtype)
    state = {k: v.to(target) if v.is_floating_point() else v for k, v in merged_state_dict(model).items()}
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    with torch.no_grad():
        model.get_base_model().save_pretrained(tmp, state_dict=state, safe_serialization=True)
    shutil.copytree(adapter, adapter_dir(tmp))
    for item in Path(base).iterdir():
        if item.is_file() and not (tmp / item.name).exists() and item.name != EXPORT_META_NAME:
            shutil.copy2(item, tmp / item.name)
    atomic_write_json(tmp / EXPORT_META_NAME, {**meta, "dtype": dtype})
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp.rename(out)
    return out
