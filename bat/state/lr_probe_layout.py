"""Paths of an lr probe's output folder (`bat train lr-probe --out DIR`, `bat.curriculum.lr_probe`).

`<out>/lr_probe.json` (one row per scale), `<out>/ckpt/x<scale>/` (the scaled weights), `<out>/x<scale>/` (a run dir
holding the scale's controller evaluation) with `lr_probe_row.json` (that scale's row, read back on a rerun).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

RESULTS_NAME = "lr_probe.json"
"""The probe's rows, one per scale, in its output folder."""
ROW_NAME = "lr_probe_row.json"
"""One scale's row inside its run dir."""
CHECKPOINTS_DIR_NAME = "ckpt"
"""Folder of the scaled exports."""


def scale_name(scale: float) -> str:
    """`x0`, `x0.5`, `x10`: the name of one scale's folders."""
    return f"x{scale:g}"


@dataclass(frozen=True)
class LrProbeLayout:
    """The lr probe's output folder."""

    root: Path

    @property
    def results(self) -> Path:
        """`<out>/lr_probe.json`."""
        return Path(self.root) / RESULTS_NAME

    def scaled_checkpoint(self, scale: float) -> Path:
        """`<out>/ckpt/x<scale>`: the export at `start + scale x step`."""
        return Path(self.root) / CHECKPOINTS_DIR_NAME / scale_name(scale)

    def scale_run(self, scale: float) -> Path:
        """`<out>/x<scale>`: the run dir of the scale's controller evaluation."""
        return Path(self.root) / scale_name(scale)

    def row(self, scale: float) -> Path:
        """`<out>/x<scale>/lr_probe_row.json`: the scale's row."""
        return self.scale_run(scale) / ROW_NAME
