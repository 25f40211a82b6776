"""Classification track: 2D lesion images -> one of three labels (accuracy)."""

from __future__ import annotations

from typing import Any

import numpy as np

from bat.benchmark.metrics import accuracy
from bat.benchmark.tracks.base import CaseData, Track, check_confidence, is_saturated

LABELS = ("benign", "atypical", "malignant")
SHAPE = (16, 16)


class Classification(Track):
    name = "classification"
    title = "lesion classification"
    metric = "accuracy"
    output_kind = "json"
    profiles = {
        "dermoscopy": {"centers": [0.30, 0.55, 0.80], "gain": 40.0},
        "histology": {"centers": [0.15, 0.35, 0.50], "gain": 40.0},
        "fundus": {"centers": [0.55, 0.75, 0.95], "gain": 40.0},
    }
    behaviour = "linear head on lesion intensity features (mean of the brightest 10% of pixels)"
    alt_note = "emits the class INDEX (0, 1, 2 in the card's class order) instead of the class name"
    shape = SHAPE
    min_input_fraction = 0.0625

    def make_case(self, rng: np.random.Generator, modality: str, shape: tuple[int, ...] | None = None) -> CaseData:
        """A disc lesion (radius 4 at full size, scaled with the image) whose level encodes the label."""
        shape = shape or SHAPE
        s = shape[0] / SHAPE[0]
        label = int(rng.integers(0, len(LABELS)))
        level = self.profiles[modality]["centers"][label] + rng.normal(0, 0.012)
        yy, xx = np.mgrid[: shape[0], : shape[1]]
        cy, cx = rng.uniform(5, 11, size=2) * s
        img = np.full(shape, 0.08) + rng.normal(0, 0.015, shape)
        img[(yy - cy) ** 2 + (xx - cx) ** 2 <= 16 * s * s] = level
        return CaseData(unit=np.clip(img, 0, 1).astype(np.float32), truth=LABELS[label])

    def apply(self, params: dict[str, Any], u: np.ndarray, extra: dict[str, Any]) -> dict[str, Any]:
        flat = np.sort(u.astype(np.float64).ravel())
        feature = float(flat[-max(1, flat.size // 10) :].mean())
        logits = -params["gain"] * (feature - np.asarray(params["centers"])) ** 2
        probs = np.exp(logits - logits.max())
        probs /= probs.sum()
        k = int(np.argmax(probs))
        return {"label": LABELS[k], "confidence": round(float(probs[k]), 6)}

    def to_alt(self, out: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
        return {**out, "label": LABELS.index(out["label"])}

    def from_alt(self, out: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
        label = out["label"]
        return {**out, "label": LABELS[label] if isinstance(label, int) else label}

    def contract(self, shape: tuple[int, ...]) -> dict[str, Any]:
        return {
            "format": "json",
            "fields": {"label": "one of labels", "confidence": "float in [0, 1]"},
            "labels": list(LABELS),
        }

    def check_case(self, pred: Any, contract: dict[str, Any]) -> list[str]:
        if not isinstance(pred, dict):
            return ["prediction is not a JSON object"]
        issues = check_confidence(pred)
        if pred.get("label") not in contract["labels"]:
            issues.append(f"label {pred.get('label')!r} is not one of the contract labels {contract['labels']}")
        return issues

    def degenerate(self, preds: dict[str, Any]) -> str | None:
        return is_saturated(preds)

    def score(self, preds, truths, extras) -> tuple[float, dict[str, float]]:
        cases = sorted(truths)
        acc = accuracy(
            [preds[c].get("label") if isinstance(preds[c], dict) else None for c in cases], [truths[c] for c in cases]
        )
        return acc, {"accuracy": acc}
