"""The base policy folder of a run: the named pretrained model (converted once into the model cache), the
configured local HF directory, or the tiny model built deterministically under `state/<run>/models/tiny`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bat.config.model import ModelConfig
from bat.state.layout import RunLayout, pretrained_model_dir


def base_model_dir(
    model: ModelConfig, layout: RunLayout, seed: int, *, progress: Callable[[str], None] = print
) -> Path:
    """Folder of the base policy for `model`; converts (`model.pretrained`) or builds (tiny) it on first use.

    Reads `model.path` as given (checked to be a model folder); writes the model cache or `models/tiny`.
    A missing pretrained package raises `PretrainedUnavailable` naming the install command.
    """
    from bat.policy.loader import check_model_dir

    if model.pretrained:
        from bat.policy.pretrained import import_pretrained

        return import_pretrained(
            model.pretrained, pretrained_model_dir(model.pretrained, model.cache_dir), progress=progress
        )
    if model.path:
        return check_model_dir(model.path)
    path = layout.base_model("tiny")
    if not (path / "config.json").exists():
        from bat.policy.tiny import build_tiny_model

        build_tiny_model(path, model.tiny, seed=seed)
    return path
