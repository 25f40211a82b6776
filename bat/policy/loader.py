"""Load any HF-format causal LM + tokenizer from a local directory, offline only (never a hub download)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bat.state.errors import StateFileError

DTYPES = ("float32", "bfloat16", "float16")
_WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)


class ModelFolderError(StateFileError, FileNotFoundError):
    """A model folder that is missing, incomplete or damaged: names the folder (or file) and what to do."""


_FOLDER_HINT = (
    "point model.path at a complete HF folder, re-export the checkpoint, or rebuild it "
    "(`bat model import NAME` / `bat model build-tiny --out DIR`)"
)


@dataclass
class Policy:
    """A loaded policy: model (eval mode), tokenizer and the directory it came from."""

    model: Any
    tokenizer: Any
    path: Path


def check_model_dir(path: str | Path) -> Path:
    """Return `path` as a Path if it is a local HF model directory; else raise naming what is missing."""
    p = Path(path)
    if not p.is_dir():
        raise ModelFolderError(
            p,
            "not a local model directory (hub ids are not allowed)",
            hint="build one with `bat model build-tiny --out DIR` or `bat model import NAME`, "
            "or point model.path at an HF directory",
        )
    missing = [] if (p / "config.json").exists() else ["config.json"]
    if not any((p / name).exists() for name in _WEIGHT_FILES):
        missing.append(f"one of {list(_WEIGHT_FILES)}")
    if missing:
        raise ModelFolderError(p, f"model directory lacks {', '.join(missing)}", hint=_FOLDER_HINT)
    return p


def load_tokenizer(path: str | Path, *, check_template: bool = True) -> Any:
    """Tokenizer from a local directory (local_files_only). With `check_template` its chat template must render
    tool lists and tool calls (`bat.policy.chat.check_chat_template` raises ChatTemplateError naming the folder)."""
    from transformers import AutoTokenizer

    from bat.policy.chat import check_chat_template

    p = Path(path)
    if not (p / "tokenizer.json").exists() and not (p / "tokenizer_config.json").exists():
        raise ModelFolderError(p, "no tokenizer.json / tokenizer_config.json", hint=_FOLDER_HINT)
    tokenizer = AutoTokenizer.from_pretrained(p, local_files_only=True)
    if check_template:
        check_chat_template(tokenizer, where=f"model folder {p}")
    return tokenizer


def install_chat_template(path: str | Path) -> Path:
    """Write bat's chat template (`bat.policy.chat.CHAT_TEMPLATE`) into the model folder `path` (its tokenizer
    files are rewritten by the tokenizer's own `save_pretrained`); returns the folder."""
    from bat.policy.chat import CHAT_TEMPLATE

    p = check_model_dir(path)
    tokenizer = load_tokenizer(p, check_template=False)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(p)
    return p


def torch_dtype(name: str) -> Any:
    """torch dtype for one of DTYPES; anything else raises listing the valid names."""
    import torch

    if name not in DTYPES:
        raise ValueError(f"dtype {name!r} is not valid; valid dtypes: {list(DTYPES)}")
    return getattr(torch, name)


def load_model(path: str | Path, *, dtype: str = "float32", device: str = "cpu") -> Any:
    """Causal LM weights from a local directory, in eval mode on `device`."""
    from safetensors import SafetensorError
    from transformers import AutoModelForCausalLM

    p = check_model_dir(path)
    try:
        model = AutoModelForCausalLM.from_pretrained(p, dtype=torch_dtype(dtype), local_files_only=True)
    except (OSError, ValueError, RuntimeError, SafetensorError) as exc:  # torn weights, a foreign or bad config
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise ModelFolderError(
            p,
            f"cannot load the weights ({type(exc).__name__}: {reason})",
            hint=f"the checkpoint is damaged or incomplete: {_FOLDER_HINT}",
        ) from None
    return model.to(device).eval()


def load_policy(path: str | Path, *, dtype: str = "float32", device: str = "cpu") -> Policy:
    """Model + tokenizer from one local directory. Sets HF_HUB_OFFLINE for this process if unset."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    p = check_model_dir(path)
    return Policy(model=load_model(p, dtype=dtype, device=device), tokenizer=load_tokenizer(p), path=p)
