"""Named pretrained policies shipped inside installed registry packages, converted offline to HF folders.

A source is a GGUF file inside a PyPI distribution (never a hub id). `import_pretrained` reads it with
transformers' GGUF loader (dequantized to fp32), detaches the GGUF quantizer so the model can be saved,
installs bat's tool-rendering chat template (`bat.policy.chat.CHAT_TEMPLATE`), sets the pad token and writes
the folder atomically with a `bat_model.json` record (source package and version, GGUF sha256, output digest,
parameters, positions). The same package gives the same bytes; a folder whose record matches is reused.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from bat.config.pretrained import REGISTRY, PretrainedSource
from bat.policy.chat import CHAT_TEMPLATE, ENDOFTEXT
from bat.state.atomic import atomic_dir, atomic_write_json, read_json
from bat.state.digest import sha256_file, sha256_tree
from bat.state.model_files import MODEL_RECORD_NAME

CONVERTER_VERSION = 1
"""Bumped whenever the conversion changes the output bytes (a cached folder of another version is rebuilt)."""
RECORD_NAME = MODEL_RECORD_NAME


class PretrainedUnavailable(FileNotFoundError):
    """The source package (or its GGUF file) is not installed; the message says what to install."""


def source(name: str) -> PretrainedSource:
    """The registered source called `name`; an unknown name raises listing the valid ones."""
    if name not in REGISTRY:
        raise KeyError(f"unknown pretrained model {name!r}; valid names: {sorted(REGISTRY)}")
    return REGISTRY[name]


def locate_gguf(src: PretrainedSource) -> tuple[Path, str]:
    """Path of the installed GGUF file and the installed distribution version (the package is never imported:
    its own imports need dependencies bat does not install)."""
    try:
        dist = metadata.distribution(src.distribution)
    except metadata.PackageNotFoundError:
        raise PretrainedUnavailable(
            f"pretrained model {src.name!r} needs the package {src.distribution}, which is not installed; "
            f"install it with: {src.install_command}"
        ) from None
    path = Path(str(dist.locate_file(src.gguf_file)))
    if not path.is_file():
        raise PretrainedUnavailable(
            f"package {src.distribution} {dist.version} is installed but lacks {src.gguf_file}; "
            f"reinstall the measured version with: {src.install_command}"
        )
    return path, dist.version


def read_record(folder: str | Path) -> dict[str, Any]:
    """`bat_model.json` of a model folder ({} when absent or unreadable)."""
    path = Path(folder) / RECORD_NAME
    try:
        record = read_json(path)
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def folder_digest(folder: str | Path) -> str:
    """sha256 over every file of a converted folder except its record."""
    return sha256_tree(folder, exclude=(RECORD_NAME,))


def is_current(folder: str | Path, src: PretrainedSource, gguf_sha256: str) -> bool:
    """True when `folder` holds a complete conversion of exactly this GGUF by this converter version."""
    record = read_record(folder)
    return (
        record.get("builder") == __name__
        and record.get("name") == src.name
        and record.get("converter_version") == CONVERTER_VERSION
        and record.get("gguf_sha256") == gguf_sha256
        and (Path(folder) / "config.json").exists()
        and record.get("output_sha256") == folder_digest(folder)
    )


def import_pretrained(name: str, out: str | Path, *, progress: Callable[[str], None] = print) -> Path:
    """Convert the named source into the HF folder `out` (atomically); reuse it when it is already current.

    Reads the GGUF from the installed package; writes config.json, generation_config.json, model.safetensors,
    tokenizer files, chat_template.jinja (bat's template) and `bat_model.json`. Returns `out`.
    """
    src = source(name)
    gguf, installed = locate_gguf(src)
    gguf_sha = sha256_file(gguf)
    target = Path(out)
    if is_current(target, src, gguf_sha):
        return target
    progress(f"converting {src.name} from {src.distribution} {installed} ({gguf.name}) to {target}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    model, tokenizer = _load_gguf(gguf)
    with atomic_dir(target) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        record = {
            "builder": __name__,
            "converter_version": CONVERTER_VERSION,
            "name": src.name,
            "source_package": src.distribution,
            "source_version": installed,
            "gguf_file": src.gguf_file,
            "gguf_sha256": gguf_sha,
            "license": src.license,
            "chat_template": "bat.policy.chat.CHAT_TEMPLATE",
            "parameters": sum(p.numel() for p in model.parameters()),
            "positions": int(model.config.max_position_embeddings),
            "output_sha256": folder_digest(tmp),
        }
        atomic_write_json(tmp / RECORD_NAME, record)
    progress(
        f"converted {src.name}: {record['parameters']:,} parameters, {record['positions']} positions, "
        f"digest {record['output_sha256'][:16]}"
    )
    return target


def _load_gguf(gguf: Path) -> tuple[Any, Any]:
    """fp32 model and tokenizer from a GGUF file, made saveable, with bat's chat template and pad token."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32, local_files_only=True
    )
    model.hf_quantizer = None  # the weights are dequantized already; the quantizer only blocks saving
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    positions = int(model.config.max_position_embeddings)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.pad_token = ENDOFTEXT  # distinct from eos (<|im_end|>), as in bat's tiny model
    tokenizer.model_max_length = positions
    pad_id = tokenizer.convert_tokens_to_ids(ENDOFTEXT)
    model.config.pad_token_id = pad_id
    model.generation_config = GenerationConfig(
        bos_token_id=model.config.bos_token_id,
        eos_token_id=model.config.eos_token_id,
        pad_token_id=pad_id,
        do_sample=False,
    )
    return model.eval(), tokenizer
