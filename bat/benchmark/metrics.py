"""Task metrics of the seven tracks (0-1 scale); scikit-image for SSIM/PSNR, numpy for the rest.

A non-finite prediction scores 0 for its case; every function returns the per-case mean unless noted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import numpy as np


def accuracy(pred: Sequence[str], truth: Sequence[str]) -> float:
    """Fraction of cases whose predicted label equals the true label."""
    if not truth:
        return 0.0
    return float(np.mean([p == t for p, t in zip(pred, truth)]))


def exact_match(pred: Sequence[str], truth: Sequence[str]) -> float:
    """Fraction of answers equal after lower-casing and whitespace collapse."""
    norm = lambda s: re.sub(r"\s+", " ", str(s).strip().lower())  # noqa: E731
    if not truth:
        return 0.0
    return float(np.mean([norm(p) == norm(t) for p, t in zip(pred, truth)]))


def box_iou(a: Sequence[float], b: Sequence[float]) -> float:
    """IoU of two boxes [r0, c0, r1, c1] (end-exclusive pixel coordinates)."""
    r0, c0 = max(a[0], b[0]), max(a[1], b[1])
    r1, c1 = min(a[2], b[2]), min(a[3], b[3])
    inter = max(0.0, r1 - r0) * max(0.0, c1 - c0)
    area = lambda x: max(0.0, x[2] - x[0]) * max(0.0, x[3] - x[1])  # noqa: E731
    union = area(a) + area(b) - inter
    return float(inter / union) if union > 0 else 0.0


def average_precision(
    detections: Iterable[tuple[str, float, Sequence[float]]], truths: dict[str, list[Sequence[float]]], iou: float = 0.5
) -> float:
    """Single-class AP at `iou` (all-point interpolation) over (case, score, box) detections and true boxes."""
    n_true = sum(len(v) for v in truths.values())
    if n_true == 0:
        return 0.0
    dets = sorted(detections, key=lambda d: -d[1])
    used = {case: [False] * len(boxes) for case, boxes in truths.items()}
    tp = np.zeros(len(dets))
    for i, (case, _score, box) in enumerate(dets):
        candidates = truths.get(case, [])
        ious = [box_iou(box, t) for t in candidates]
        if ious:
            j = int(np.argmax(ious))
            if ious[j] >= iou and not used[case][j]:
                used[case][j] = True
                tp[i] = 1
    if not len(dets):
        return 0.0
    cum_tp = np.cumsum(tp)
    recall = cum_tp / n_true
    precision = cum_tp / np.arange(1, len(dets) + 1)
    mrec = np.concatenate([[0.0], recall, [1.0]])
    mpre = np.concatenate([[0.0], precision, [0.0]])
    mpre = np.maximum.accumulate(mpre[::-1])[::-1]
    steps = np.where(mrec[1:] != mrec[:-1])[0]
    return float(np.sum((mrec[steps + 1] - mrec[steps]) * mpre[steps + 1]))


def ssim(pred: np.ndarray, truth: np.ndarray) -> float:
    """SSIM on the unit intensity range (scikit-image); 0 for a shape mismatch or non-finite prediction."""
    from skimage.metrics import structural_similarity

    pred = np.asarray(pred, dtype=np.float64)
    if pred.shape != truth.shape or not np.all(np.isfinite(pred)):
        return 0.0
    win = min(7, *[d if d % 2 else d - 1 for d in truth.shape])
    return float(max(0.0, structural_similarity(truth.astype(np.float64), pred, data_range=1.0, win_size=win)))


def psnr(pred: np.ndarray, truth: np.ndarray) -> float:
    """PSNR in dB on the unit range (scikit-image); 0 for a shape mismatch or non-finite prediction."""
    from skimage.metrics import peak_signal_noise_ratio

    pred = np.asarray(pred, dtype=np.float64)
    if pred.shape != truth.shape or not np.all(np.isfinite(pred)):
        return 0.0
    if np.array_equal(pred, truth):
        return 100.0
    return float(peak_signal_noise_ratio(truth.astype(np.float64), pred, data_range=1.0))


def dice(pred: np.ndarray, truth: np.ndarray, labels: Sequence[int]) -> float:
    """Mean Dice over `labels`; a label absent from both counts 1; shape mismatch or non-finite -> 0."""
    pred = np.asarray(pred)
    if pred.shape != truth.shape or (pred.dtype.kind == "f" and not np.all(np.isfinite(pred))):
        return 0.0
    scores = []
    for label in labels:
        p, t = pred == label, truth == label
        denom = p.sum() + t.sum()
        scores.append(1.0 if denom == 0 else 2.0 * np.logical_and(p, t).sum() / denom)
    return float(np.mean(scores))


def keywords_in(text: str, vocabulary: Sequence[str]) -> set[str]:
    """Vocabulary words present (whole word, case-insensitive) in `text`."""
    low = str(text).lower()
    return {w for w in vocabulary if re.search(rf"\b{re.escape(w.lower())}\b", low)}


def keyword_f1(pred_text: str, truth_keywords: Sequence[str], vocabulary: Sequence[str]) -> float:
    """F1 between vocabulary keywords found in `pred_text` and the true keywords (both empty -> 1)."""
    found, truth = keywords_in(pred_text, vocabulary), set(truth_keywords)
    if not found and not truth:
        return 1.0
    tp = len(found & truth)
    if tp == 0:
        return 0.0
    precision, recall = tp / len(found), tp / len(truth)
    return 2 * precision * recall / (precision + recall)
