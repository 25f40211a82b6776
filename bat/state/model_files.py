"""Metadata files of an HF model folder: the context length in `config.json`, and bat's build record
(`bat_model.json`, written by the tiny builder and the pretrained converter)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MODEL_RECORD_NAME = "bat_model.json"


def folder_positions(path: str | Path) -> int | None:
    """`max_position_embeddings` of the folder's config.json (None when unreadable or absent)."""
    try:
        value = json.loads((Path(path) / "config.json").read_text(encoding="utf-8")).get("max_position_embeddings")
    except (OSError, ValueError, AttributeError):
        return None
    return int(value) if isinstance(value, int) and value > 0 else None


def read_build_info(path: str | Path) -> dict[str, Any]:
    """The build record of a model folder (`bat_model.json`; empty for folders bat did not build)."""
    record = Path(path) / MODEL_RECORD_NAME
    return json.loads(record.read_text(encoding="utf-8")) if record.exists() else {}
