"""How far one training block moved the weights: per-weight step statistics between two exported checkpoints.

Reads the `*.safetensors` of two HF model folders (same tensor names and shapes). Writes nothing. With `lr`, also
the fraction of weights whose step is within 20% of lr: a block that is one AdamW step from a fresh optimizer moves
every weight with a gradient well above eps by lr x sign(g), whatever the gradient's size.
`python -m bat.train.step_stats BEFORE AFTER [--lr LR]` prints the figures as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

QUANTILE_SAMPLE = 1_000_000
"""Moved weights sampled (seeded) for the step quantiles; torch.quantile refuses inputs above 16M elements."""


def _tensors(folder: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{folder}: no *.safetensors file (expected an exported HF model folder)")
    out: dict[str, Any] = {}
    for f in files:
        out.update(load_file(str(f)))
    return out


def step_stats(before: Path, after: Path, lr: float | None = None) -> dict[str, Any]:
    """Per-weight |after - before| over every tensor both folders hold (`only_in_one` names the others, e.g. a tied
    lm_head that one export writes out): weights, the fraction moved, the 10/50/90% quantiles of the moved weights'
    step, the step's L2 norm and its ratio to the weights' norm, and (with `lr`) the fraction of weights whose step
    is within 20% of lr. Raises ValueError when the folders share no tensor or a shared one differs in shape."""
    import torch

    a, b = _tensors(Path(before)), _tensors(Path(after))
    common = sorted(set(a) & set(b))
    if not common or any(a[k].shape != b[k].shape for k in common):
        raise ValueError(f"{before} and {after} hold different tensors: not two checkpoints of one model")
    step = torch.cat([(b[k].float() - a[k].float()).flatten() for k in common])
    weights = torch.cat([a[k].float().flatten() for k in common])
    size = step.abs()
    moved = size[size > 0]
    gen = torch.Generator().manual_seed(0)
    sample = moved[torch.randperm(moved.numel(), generator=gen)[:QUANTILE_SAMPLE]] if moved.numel() else moved
    quantiles = torch.quantile(sample, torch.tensor([0.1, 0.5, 0.9])).tolist() if sample.numel() else [0.0] * 3
    out: dict[str, Any] = {
        "weights": int(step.numel()),
        "only_in_one": sorted(set(a) ^ set(b)),
        "moved_fraction": float(moved.numel() / step.numel()),
        "step_q10": quantiles[0],
        "step_median": quantiles[1],
        "step_q90": quantiles[2],
        "step_l2": float(step.norm()),
        "step_over_weights_l2": float(step.norm() / weights.norm()),
    }
    if lr is not None:
        out["at_lr_fraction"] = float(((size > 0.8 * lr) & (size < 1.2 * lr)).float().mean())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bat.train.step_stats", description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, help="exported checkpoint folder the block started from")
    parser.add_argument("after", type=Path, help="exported checkpoint folder the block wrote")
    parser.add_argument("--lr", type=float, help="the block's learning rate (adds at_lr_fraction)")
    args = parser.parse_args(argv)
    try:
        print(json.dumps(step_stats(args.before, args.after, args.lr)))
    except (FileNotFoundError, ValueError) as exc:
        print(f"step_stats: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
