"""Synthesis track: low-resolution volumes -> high-resolution volumes by calibrated interpolation (SSIM)."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import ndimage

from bat.benchmark.tracks.base import CaseData, scaled
from bat.benchmark.tracks.enhancement import ImageRestorationTrack, smooth_phantom

SHAPE = (8, 10, 12)


class Synthesis(ImageRestorationTrack):
    name = "synthesis"
    title = "high-resolution synthesis"
    metric = "SSIM"
    output_kind = "npy"
    profiles = {
        "mri-lowres": {"order": 3, "gain": 1.0, "offset": 0.0},
        "thick-slice-ct": {"order": 3, "gain": 0.8, "offset": 0.1},
        "pet-lowres": {"order": 1, "gain": 1.4, "offset": -0.25},
    }
    behaviour = "2x spline upsampling (card's order) followed by the card's intensity calibration gain*x+offset"
    alt_note = "writes volumes in (x, y, z) axis order, i.e. REVERSED with respect to the (z, y, x) contract"
    shape = SHAPE
    min_input_fraction = 0.45

    def case_shape(self, fraction: float = 1.0) -> tuple[int, ...]:
        """The high-resolution shape at input `fraction`: the low-resolution input (half of it per axis) holds at
        most `fraction` of its full-size elements, and every axis stays even so 2x upsampling lands on the truth."""
        return tuple(2 * scaled(n // 2, fraction ** (1 / len(self.shape))) for n in self.shape)

    def make_case(self, rng: np.random.Generator, modality: str, shape: tuple[int, ...] | None = None) -> CaseData:
        """A smooth high-resolution phantom (the truth) and its half-resolution, miscalibrated input."""
        shape = shape or SHAPE
        prof = self.profiles[modality]
        high = smooth_phantom(rng, shape, blobs=3)
        low = ndimage.zoom(high, 0.5, order=1)
        low = (low - prof["offset"]) / prof["gain"]
        return CaseData(unit=np.clip(low, 0, 1).astype(np.float32), truth=high.astype(np.float32))

    def apply(self, params: dict[str, Any], u: np.ndarray, extra: dict[str, Any]) -> np.ndarray:
        up = ndimage.zoom(u.astype(np.float64), 2, order=params["order"])
        return np.clip(params["gain"] * up + params["offset"], 0, 1).astype(np.float32)

    def to_alt(self, out: np.ndarray, extra: dict[str, Any]) -> np.ndarray:
        return np.ascontiguousarray(out.transpose(2, 1, 0))

    def from_alt(self, out: np.ndarray, extra: dict[str, Any]) -> np.ndarray:
        return np.ascontiguousarray(out.transpose(2, 1, 0))

    def contract(self, shape: tuple[int, ...]) -> dict[str, Any]:
        return {
            "format": "npy",
            "shape": [2 * n for n in shape],
            "axes": "zyx",
            "dtype": "float32",
            "range": [0.0, 1.0],
        }
