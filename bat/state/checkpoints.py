"""Step checkpoint directories: `step_NNNNNN/` valid only when its `meta.json` exists; keep newest K; `best` pointer.

Writers fill a temp directory and rename it into place, then write `meta.json` last.
"""

from __future__ import annotations

import contextlib
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bat.state.atomic import atomic_dir, atomic_write_json, read_json

META_NAME = "meta.json"
EXPORT_META_NAME = "bat_export.json"
"""What an HF export records about its source (step, config hash) beside the weights."""
ADAPTER_DIR_NAME = "adapter"
"""Folder inside an HF export that holds the LoRA adapter it was merged from (`adapter_config.json`,
`adapter_model.safetensors`; only exports of LoRA training have it)."""
_STEP_RE = re.compile(r"^step_(\d{6})$")


def step_name(step: int) -> str:
    if step < 0:
        raise ValueError(f"checkpoint step must be >= 0, got {step}")
    return f"step_{step:06d}"


def adapter_dir(export_dir: str | Path) -> Path:
    """The LoRA adapter folder of the HF export `export_dir` (loadable with peft's `PeftModel.from_pretrained` onto
    the base the export's `bat_export.json` names)."""
    return Path(export_dir) / ADAPTER_DIR_NAME


@dataclass(frozen=True)
class CheckpointStore:
    """Checkpoints of one training stream under `root` (e.g. `checkpoints/round_03`)."""

    root: Path

    def path(self, step: int) -> Path:
        return Path(self.root) / step_name(step)

    def valid_steps(self) -> list[int]:
        """Steps whose directory holds a `meta.json` (ascending); half-written ones are ignored."""
        root = Path(self.root)
        if not root.is_dir():
            return []
        steps = []
        for child in root.iterdir():
            match = _STEP_RE.match(child.name)
            if match and (child / META_NAME).is_file():
                steps.append(int(match.group(1)))
        return sorted(steps)

    def latest(self) -> tuple[int, Path] | None:
        steps = self.valid_steps()
        return (steps[-1], self.path(steps[-1])) if steps else None

    def meta(self, step: int) -> dict[str, Any]:
        return read_json(self.path(step) / META_NAME)

    @contextlib.contextmanager
    def save(self, step: int, meta: dict[str, Any], keep: int | None = None) -> Iterator[Path]:
        """Yield a temp dir to fill; on success it becomes `step_NNNNNN/`, then `meta.json` is written, then pruning."""
        with atomic_dir(self.path(step)) as tmp:
            yield tmp
        atomic_write_json(self.path(step) / META_NAME, {"step": step, **meta})
        if keep is not None:
            self.prune(keep)

    def prune(self, keep: int) -> list[int]:
        """Remove all but the newest `keep` valid steps and any unmarked step dirs; returns removed steps."""
        if keep < 1:
            raise ValueError(f"keep must be >= 1, got {keep}")
        valid = self.valid_steps()
        removed = valid[:-keep]
        for step in removed:
            shutil.rmtree(self.path(step), ignore_errors=True)
        root = Path(self.root)
        for child in root.iterdir() if root.is_dir() else []:
            if _STEP_RE.match(child.name) and not (child / META_NAME).is_file():
                shutil.rmtree(child, ignore_errors=True)
        return removed


def write_best(
    best_json: Path, checkpoint: Path, *, round_index: int, score: float, extra: dict[str, Any] | None = None
) -> None:
    """Point the run's `best.json` at `checkpoint` (the retained theta*)."""
    atomic_write_json(best_json, {"checkpoint": str(checkpoint), "round": round_index, "score": score, **(extra or {})})


def read_best(best_json: Path) -> dict[str, Any] | None:
    return read_json(best_json) if Path(best_json).exists() else None
