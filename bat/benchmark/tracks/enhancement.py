"""Enhancement track: noisy low-dose slices -> denoised slices (SSIM; PSNR reported)."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import ndimage

from bat.benchmark.metrics import psnr, ssim
from bat.benchmark.tracks.base import CaseData, Track, check_array, constant_arrays

SHAPE = (20, 24)


def smooth_phantom(rng: np.random.Generator, shape: tuple[int, ...], blobs: int = 4) -> np.ndarray:
    """A smooth phantom in [0.1, 0.9]: a sum of wide Gaussian blobs."""
    grids = np.meshgrid(*[np.arange(n) for n in shape], indexing="ij")
    img = np.zeros(shape)
    for _ in range(blobs):
        center = [rng.uniform(0.2 * n, 0.8 * n) for n in shape]
        width = rng.uniform(2.5, 4.5)
        img += rng.uniform(0.4, 1.0) * np.exp(-sum((g - c) ** 2 for g, c in zip(grids, center)) / (2 * width**2))
    img = (img - img.min()) / max(float(img.max() - img.min()), 1e-9)
    return 0.1 + 0.8 * img


class ImageRestorationTrack(Track):
    """Tracks whose output is an image array in [0, 1] scored against the truth by SSIM (PSNR reported)."""

    def check_case(self, pred: Any, contract: dict[str, Any]) -> list[str]:
        return check_array(pred, contract)

    def degenerate(self, preds: dict[str, Any]) -> str | None:
        return constant_arrays(preds)

    def score(self, preds, truths, extras) -> tuple[float, dict[str, float]]:
        s = [ssim(preds[c], truths[c]) for c in sorted(truths)]
        p = [psnr(preds[c], truths[c]) for c in sorted(truths)]
        return float(np.mean(s)), {"ssim": float(np.mean(s)), "psnr_db": float(np.mean(p))}


class Enhancement(ImageRestorationTrack):
    name = "enhancement"
    title = "low-dose denoising"
    metric = "SSIM"
    output_kind = "npy"
    profiles = {
        "low-dose-ct": {"noise": 0.05, "sigma": 1.0, "gain": 1.0, "offset": 0.0},
        "fast-mri": {"noise": 0.03, "sigma": 0.7, "gain": 0.8, "offset": 0.1},
        "pet": {"noise": 0.06, "sigma": 1.2, "gain": 1.25, "offset": -0.1},
    }
    behaviour = "Gaussian denoising filter (card's sigma) and intensity calibration gain*x+offset, clipped to [0, 1]"
    alt_note = "writes arrays in (x, y) axis order, i.e. TRANSPOSED with respect to the (y, x) contract"
    shape = SHAPE
    min_input_fraction = 0.25

    def make_case(self, rng: np.random.Generator, modality: str, shape: tuple[int, ...] | None = None) -> CaseData:
        """A smooth phantom (blob widths fixed, so a smaller slice is a crop-like view) plus the modality's noise."""
        shape = shape or SHAPE
        clean = smooth_phantom(rng, shape)
        prof = self.profiles[modality]
        noisy = (clean + rng.normal(0, prof["noise"], shape) - prof["offset"]) / prof["gain"]
        return CaseData(unit=np.clip(noisy, 0, 1).astype(np.float32), truth=clean.astype(np.float32))

    def apply(self, params: dict[str, Any], u: np.ndarray, extra: dict[str, Any]) -> np.ndarray:
        smooth = ndimage.gaussian_filter(u.astype(np.float64), params["sigma"])
        return np.clip(params["gain"] * smooth + params["offset"], 0, 1).astype(np.float32)

    def to_alt(self, out: np.ndarray, extra: dict[str, Any]) -> np.ndarray:
        return np.ascontiguousarray(out.T)

    def from_alt(self, out: np.ndarray, extra: dict[str, Any]) -> np.ndarray:
        return np.ascontiguousarray(out.T)

    def contract(self, shape: tuple[int, ...]) -> dict[str, Any]:
        return {"format": "npy", "shape": list(shape), "axes": "yx", "dtype": "float32", "range": [0.0, 1.0]}
