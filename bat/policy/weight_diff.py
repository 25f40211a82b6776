"""How far one HF checkpoint's weights are from another's: read two model folders' safetensors tensor by tensor
(one pair in memory at a time), write nothing."""

from __future__ import annotations

import json
import math
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bat.policy.loader import ModelFolderError
from bat.state.model_files import HF_WEIGHTS, HF_WEIGHTS_INDEX


@dataclass(frozen=True)
class WeightDiff:
    """`moved` / `base` Frobenius norms over every shared tensor, the largest per-tensor ratio, and how many
    elements and tensors differ at all."""

    tensors: int
    tensors_changed: int
    elements: int
    elements_changed: int
    relative_norm: float
    max_relative_norm: float
    max_tensor: str

    def line(self) -> str:
        """The figures on one line."""
        return (
            f"||B - A|| / ||A|| {self.relative_norm:.3g} over {self.tensors} tensors (largest {self.max_relative_norm:.3g}: "
            f"{self.max_tensor}); {self.elements_changed:,} of {self.elements:,} elements changed "
            f"({self.elements_changed / max(self.elements, 1):.1%}), {self.tensors_changed} tensors"
        )


def _tensor_files(folder: Path, stack: ExitStack) -> tuple[dict[str, Path], dict[Path, Any]]:
    """Tensor name -> the safetensors file holding it (one file, or the shards an index lists), and each of those
    files opened once (closed with `stack`)."""
    from safetensors import safe_open

    if (folder / HF_WEIGHTS).is_file():
        single = folder / HF_WEIGHTS
        handle = stack.enter_context(safe_open(single, "pt"))
        return dict.fromkeys(handle.keys(), single), {single: handle}
    if (folder / HF_WEIGHTS_INDEX).is_file():
        weight_map = json.loads((folder / HF_WEIGHTS_INDEX).read_text())["weight_map"]
        files = {name: folder / shard for name, shard in weight_map.items()}
        return files, {f: stack.enter_context(safe_open(f, "pt")) for f in set(files.values())}
    raise ModelFolderError(
        folder, f"no {HF_WEIGHTS} or {HF_WEIGHTS_INDEX}", hint="point at an exported HF model folder"
    )


def weight_diff(a: str | Path, b: str | Path) -> WeightDiff:
    """Compare checkpoint `b` to `a` over the tensors both hold (in float64 sums), opening each safetensors file once;
    ModelFolderError when either is not a safetensors model folder, they share no tensor, or a shared tensor's shape
    differs."""
    moved_sq = base_sq = worst = 0.0
    elements = changed = tensors_changed = 0
    worst_name = ""
    with ExitStack() as stack:
        files_a, handles_a = _tensor_files(Path(a), stack)
        files_b, handles_b = _tensor_files(Path(b), stack)
        shared = sorted(n for n in files_a if n in files_b)
        if not shared:
            raise ModelFolderError(Path(b), f"shares no tensor with {a}", hint="compare two checkpoints of one model")
        for name in shared:
            x = handles_a[files_a[name]].get_tensor(name).double()
            y = handles_b[files_b[name]].get_tensor(name).double()
            if x.shape != y.shape:
                raise ModelFolderError(
                    Path(b),
                    f"tensor {name} has shape {tuple(y.shape)}, not {tuple(x.shape)} as in {a}",
                    hint="compare two checkpoints of one model",
                )
            delta = y - x
            d_sq, x_sq = float(delta.pow(2).sum()), float(x.pow(2).sum())
            moved_sq += d_sq
            base_sq += x_sq
            n_changed = int((delta != 0).sum())
            elements += x.numel()
            changed += n_changed
            tensors_changed += n_changed > 0
            ratio = math.sqrt(d_sq / x_sq) if x_sq else (math.inf if d_sq else 0.0)
            if ratio > worst:
                worst, worst_name = ratio, name
    return WeightDiff(
        tensors=len(shared),
        tensors_changed=tensors_changed,
        elements=elements,
        elements_changed=changed,
        relative_norm=math.sqrt(moved_sq / base_sq) if base_sq else 0.0,
        max_relative_norm=worst,
        max_tensor=worst_name,
    )
