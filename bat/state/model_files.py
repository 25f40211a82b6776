"""Files of an HF model folder: the weights and config file names of an export, the context length in
`config.json`, and bat's build record (`bat_model.json`, written by the tiny builder and the pretrained converter)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MODEL_RECORD_NAME = "bat_model.json"
HF_WEIGHTS = "model.safetensors"
"""The weights file of an HF export (present once the export is complete; the HF format's name, not a state name)."""
HF_WEIGHTS_INDEX = f"{HF_WEIGHTS}.index.json"
"""The shard index of a model saved in several safetensors files."""
HF_CONFIG = "config.json"
"""The model config of an HF export (what makes a folder one)."""


def export_weights(folder: str | Path) -> Path:
    """`<folder>/model.safetensors`."""
    return Path(folder) / HF_WEIGHTS


def export_config(folder: str | Path) -> Path:
    """`<folder>/config.json`."""
    return Path(folder) / HF_CONFIG


def folder_config(path: str | Path) -> dict[str, Any] | None:
    """The folder's HF `config.json` as a dict (None when absent, unreadable or not a JSON object)."""
    try:
        data = json.loads(export_config(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def folder_positions(path: str | Path) -> int | None:
    """`max_position_embeddings` of the folder's config.json (None when unreadable or absent)."""
    value = (folder_config(path) or {}).get("max_position_embeddings")
    return int(value) if isinstance(value, int) and value > 0 else None


def read_build_info(path: str | Path) -> dict[str, Any]:
    """The build record of a model folder (`bat_model.json`; empty for folders bat did not build)."""
    record = Path(path) / MODEL_RECORD_NAME
    return json.loads(record.read_text(encoding="utf-8")) if record.exists() else {}
