"""Detection track: 2D radiographs with bright findings -> boxes with scores (mAP@0.5)."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import ndimage

from bat.benchmark.metrics import average_precision
from bat.benchmark.tracks.base import CaseData, Track, scaled, sigmoid

SHAPE = (24, 24)


class Detection(Track):
    name = "detection"
    title = "finding detection"
    metric = "mAP@0.5"
    output_kind = "json"
    profiles = {
        "radiograph": {"bg": 0.10, "fg": 0.40, "threshold": 0.25, "sigma": 0.5},
        "scout-ct": {"bg": 0.30, "fg": 0.60, "threshold": 0.45, "sigma": 0.5},
        "mammography": {"bg": 0.55, "fg": 0.90, "threshold": 0.72, "sigma": 0.5},
    }
    behaviour = "Gaussian smoothing, intensity threshold, connected components -> boxes [r0, c0, r1, c1]"
    alt_note = "emits box coordinates NORMALISED to [0, 1] by the image size instead of pixel coordinates"
    shape = SHAPE
    min_input_fraction = 0.0625

    def make_case(self, rng: np.random.Generator, modality: str, shape: tuple[int, ...] | None = None) -> CaseData:
        """1-3 separated bright boxes (sides 4-7 at full size, scaled with the image, never under 3)."""
        shape = shape or SHAPE
        lo = max(3, scaled(4, shape[0] / SHAPE[0]))
        hi = max(lo + 1, scaled(8, shape[0] / SHAPE[0]))
        prof = self.profiles[modality]
        img = np.full(shape, prof["bg"]) + rng.normal(0, 0.02, shape)
        occupied = np.zeros(shape, dtype=bool)
        boxes: list[list[int]] = []
        for _ in range(int(rng.integers(1, 4))):
            for _try in range(20):
                h, w = (int(v) for v in rng.integers(lo, hi, size=2))
                r0, c0 = int(rng.integers(1, shape[0] - h - 1)), int(rng.integers(1, shape[1] - w - 1))
                if not occupied[r0 - 1 : r0 + h + 1, c0 - 1 : c0 + w + 1].any():
                    occupied[r0 - 1 : r0 + h + 1, c0 - 1 : c0 + w + 1] = True
                    img[r0 : r0 + h, c0 : c0 + w] = prof["fg"] + rng.normal(0, 0.02, (h, w))
                    boxes.append([r0, c0, r0 + h, c0 + w])
                    break
        return CaseData(unit=np.clip(img, 0, 1).astype(np.float32), truth=boxes)

    def apply(self, params: dict[str, Any], u: np.ndarray, extra: dict[str, Any]) -> dict[str, Any]:
        smooth = ndimage.gaussian_filter(u.astype(np.float64), params["sigma"])
        labels, _n = ndimage.label(smooth > params["threshold"])
        boxes, scores = [], []
        for k, sl in enumerate(ndimage.find_objects(labels), start=1):
            if sl is None:
                continue
            area = int((labels[sl] == k).sum())
            if area < 4 or area > 0.3 * u.size:
                continue
            boxes.append([sl[0].start, sl[1].start, sl[0].stop, sl[1].stop])
            scores.append(round(sigmoid(8 * (float(u[sl].mean()) - params["threshold"])), 6))
        conf = max(scores) if scores else 0.0
        return {"boxes": boxes, "scores": scores, "confidence": conf}

    def to_alt(self, out: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
        h, w = extra["input_shape"]
        return {**out, "boxes": [[b[0] / h, b[1] / w, b[2] / h, b[3] / w] for b in out["boxes"]]}

    def from_alt(self, out: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
        h, w = extra["input_shape"]
        return {
            **out,
            "boxes": [[round(b[0] * h), round(b[1] * w), round(b[2] * h), round(b[3] * w)] for b in out["boxes"]],
        }

    def contract(self, shape: tuple[int, ...]) -> dict[str, Any]:
        return {
            "format": "json",
            "fields": {"boxes": "list of [r0, c0, r1, c1] pixel coordinates", "scores": "one float per box"},
            "image_shape": list(shape),
            "min_findings": 1,
        }

    def check_case(self, pred: Any, contract: dict[str, Any]) -> list[str]:
        if (
            not isinstance(pred, dict)
            or not isinstance(pred.get("boxes"), list)
            or not isinstance(pred.get("scores"), list)
        ):
            return ["prediction needs 'boxes' and 'scores' lists"]
        issues = []
        if len(pred["boxes"]) != len(pred["scores"]):
            issues.append("boxes and scores differ in length")
        if any(not np.isfinite(s) for s in pred["scores"] if isinstance(s, (int, float))) or not np.isfinite(
            pred.get("confidence", 0.0)
        ):
            issues.append("non-finite scores (NaN model output)")
        h, w = contract["image_shape"]
        flat = [v for b in pred["boxes"] for v in (b if isinstance(b, list) else [])]
        if any(len(b) != 4 for b in pred["boxes"] if isinstance(b, list)):
            issues.append("every box needs 4 coordinates")
        elif flat and max(flat) <= 1.0 and any(0 < v < 1 for v in flat):
            issues.append(f"box coordinates look normalised to [0, 1]; the contract wants pixels of a {h}x{w} image")
        elif flat and (min(flat) < 0 or max(flat) > max(h, w)):
            issues.append(f"box coordinates outside the {h}x{w} image")
        return issues

    def degenerate(self, preds: dict[str, Any]) -> str | None:
        boxes = [p.get("boxes") for p in preds.values() if isinstance(p, dict)]
        if boxes and len(boxes) == len(preds) and all(not b for b in boxes):
            return "no findings in any checked case, but every image has at least one: input is probably not normalised"
        return None

    def score(self, preds, truths, extras) -> tuple[float, dict[str, float]]:
        dets = []
        for case, pred in preds.items():
            if isinstance(pred, dict):
                for box, s in zip(pred.get("boxes", []), pred.get("scores", [])):
                    if isinstance(s, (int, float)) and np.isfinite(s) and isinstance(box, list) and len(box) == 4:
                        dets.append((case, float(s), box))
        ap = average_precision(dets, {c: list(b) for c, b in truths.items()}, iou=0.5)
        return ap, {"mAP@0.5": ap}
