"""Segmentation track: small 3D volumes with two ellipsoid organs -> label volumes (mean Dice)."""

from __future__ import annotations

from typing import Any

import numpy as np

from bat.benchmark.metrics import dice
from bat.benchmark.tracks.base import CaseData, Track, check_array

SHAPE = (8, 10, 12)
ORGANS = ("liver", "kidney")


class Segmentation(Track):
    name = "segmentation"
    title = "multi-organ segmentation"
    metric = "Dice"
    output_kind = "npy"
    profiles = {
        "ct": {"levels": [0.40, 0.75], "windows": [[0.25, 0.575], [0.575, 1.01]]},
        "mri-t1": {"levels": [0.75, 0.40], "windows": [[0.575, 1.01], [0.25, 0.575]]},
        "mri-t2": {"levels": [0.20, 0.55], "windows": [[0.12, 0.375], [0.375, 0.70]]},
    }
    behaviour = "one intensity window per organ (label 1 = liver, 2 = kidney), background 0"
    alt_note = "writes volumes in (x, y, z) axis order, i.e. REVERSED with respect to the (z, y, x) contract"
    shape = SHAPE
    min_input_fraction = 0.125

    def make_case(self, rng: np.random.Generator, modality: str, shape: tuple[int, ...] | None = None) -> CaseData:
        """Two ellipsoid organs; centres, jitter and radii scale per axis with the volume."""
        shape = shape or SHAPE
        ratio = np.asarray(shape) / np.asarray(SHAPE)
        levels = self.profiles[modality]["levels"]
        zz, yy, xx = np.mgrid[: shape[0], : shape[1], : shape[2]]
        vol = np.full(shape, 0.05) + rng.normal(0, 0.02, shape)
        truth = np.zeros(shape, dtype=np.uint8)
        centers = ((4, 4, 3.5), (4, 5.5, 8.5))
        for label, (center, level) in enumerate(zip(centers, levels), start=1):
            c = np.asarray(center) * ratio + rng.uniform(-0.6, 0.6, 3) * ratio
            radii = rng.uniform([2.2, 2.2, 2.0], [3.0, 3.0, 2.8]) * ratio
            mask = ((zz - c[0]) / radii[0]) ** 2 + ((yy - c[1]) / radii[1]) ** 2 + ((xx - c[2]) / radii[2]) ** 2 <= 1
            mask &= truth == 0
            truth[mask] = label
            vol[mask] = level + rng.normal(0, 0.02, int(mask.sum()))
        return CaseData(unit=np.clip(vol, 0, 1).astype(np.float32), truth=truth)

    def apply(self, params: dict[str, Any], u: np.ndarray, extra: dict[str, Any]) -> np.ndarray:
        out = np.zeros(u.shape, dtype=np.uint8)
        for label, (lo, hi) in enumerate(params["windows"], start=1):
            out[(u >= lo) & (u < hi)] = label
        return out

    def to_alt(self, out: np.ndarray, extra: dict[str, Any]) -> np.ndarray:
        return np.ascontiguousarray(out.transpose(2, 1, 0))

    def from_alt(self, out: np.ndarray, extra: dict[str, Any]) -> np.ndarray:
        return np.ascontiguousarray(out.transpose(2, 1, 0))

    def contract(self, shape: tuple[int, ...]) -> dict[str, Any]:
        return {
            "format": "npy",
            "shape": list(shape),
            "axes": "zyx",
            "dtype": "uint8",
            "labels": {"0": "background", "1": ORGANS[0], "2": ORGANS[1]},
        }

    def check_case(self, pred: Any, contract: dict[str, Any]) -> list[str]:
        issues = check_array(pred, contract)
        if isinstance(pred, np.ndarray) and pred.dtype.kind in "iu":
            extra = sorted(set(np.unique(pred).tolist()) - {0, 1, 2})
            if extra:
                issues.append(f"labels {extra} not in the contract labels [0, 1, 2]")
        return issues

    def degenerate(self, preds: dict[str, Any]) -> str | None:
        arrays = [p for p in preds.values() if isinstance(p, np.ndarray) and p.dtype.kind in "iu" and p.size]
        if arrays and len(arrays) == len(preds) and all(len(np.unique(a)) == 1 for a in arrays):
            return (
                f"every checked volume has a single label ({int(arrays[0].flat[0])}): input is probably not normalised"
            )
        return None

    def score(self, preds, truths, extras) -> tuple[float, dict[str, float]]:
        d = [dice(preds[c], truths[c], (1, 2)) for c in sorted(truths)]
        return float(np.mean(d)), {"dice": float(np.mean(d))}
