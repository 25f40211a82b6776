"""Files of a `bat train sft|grpo --out DIR` run: step checkpoints, the HF export, the metrics log and the summary.

Built here only; `bat.cli.train` opens one `TrainOutLayout` per run and passes its paths on."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TrainOutLayout:
    """`<out>/checkpoints/step_NNNNNN/` (resumed from), `<out>/export/` (HF safetensors), `<out>/metrics.jsonl` (one
    line per step) and `<out>/summary.json` (written last, by rank 0)."""

    root: Path

    def __init__(self, root: str | os.PathLike[str]) -> None:
        object.__setattr__(self, "root", Path(root))

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def export(self) -> Path:
        return self.root / "export"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.jsonl"

    @property
    def summary(self) -> Path:
        return self.root / "summary.json"
