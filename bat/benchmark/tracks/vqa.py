"""VQA track: image + question (count / presence / side) -> answer string (exact match)."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import ndimage

from bat.benchmark.metrics import exact_match
from bat.benchmark.tracks.base import CaseData, Track, check_confidence, is_saturated, scaled, sigmoid

SHAPE = (16, 16)
MIN_AREA = 4
"""Smallest component area (pixels) the model counts as a lesion at full size."""
QUESTIONS = {
    "count": ("How many lesions are visible?", ["0", "1", "2", "3"]),
    "presence": ("Is any lesion visible?", ["no", "yes"]),
    "side": ("On which side is the largest lesion?", ["left", "right", "none"]),
}


class Vqa(Track):
    name = "vqa"
    title = "visual question answering"
    metric = "exact match"
    output_kind = "json"
    profiles = {
        "dermatology-photo": {"bg": 0.10, "fg": 0.45, "threshold": 0.28},
        "microscopy": {"bg": 0.35, "fg": 0.65, "threshold": 0.50},
        "endoscopy": {"bg": 0.60, "fg": 0.95, "threshold": 0.78},
    }
    behaviour = "threshold + connected components, then the question type's answer mapping"
    alt_note = "answers with the CHOICE INDEX (0-based position in the question's choices) instead of the text"
    shape = SHAPE
    min_input_fraction = 0.25

    def make_case(self, rng: np.random.Generator, modality: str, shape: tuple[int, ...] | None = None) -> CaseData:
        """0-3 square lesions of distinct sides (3, 4, 5 at full size; k, k+1, k+2 scaled) at four separated spots."""
        shape = shape or SHAPE
        s = shape[0] / SHAPE[0]
        k, a, gap = max(1, scaled(3, s)), max(1, scaled(2, s)), max(1, scaled(3, s))
        b = max(a + k + 2 + gap, (shape[1] + 1) // 2)  # right-hand spots start in the right half
        prof = self.profiles[modality]
        img = np.full(shape, prof["bg"]) + rng.normal(0, 0.02, shape)
        count = int(rng.integers(0, 4))
        spots = [(a, a), (a, b), (b, a), (b, b)]
        chosen = [spots[i] for i in rng.permutation(4)[:count]]
        sizes = rng.permutation([k, k + 1, k + 2])[:count]
        for (r, c), side in zip(chosen, sizes):
            img[r : r + side, c : c + side] = prof["fg"] + rng.normal(0, 0.02, (side, side))
        kind = str(rng.choice(sorted(QUESTIONS)))
        question, choices = QUESTIONS[kind]
        answer = self._answer(kind, [(r, c, side * side) for (r, c), side in zip(chosen, sizes)], shape[1])
        return CaseData(
            unit=np.clip(img, 0, 1).astype(np.float32),
            truth=answer,
            extra={"question": question, "choices": choices, "type": kind},
        )

    @staticmethod
    def _answer(kind: str, lesions: list[tuple[float, float, int]], width: int) -> str:
        """The answer to a `kind` question about `lesions` (row, column, area) in an image `width` columns wide."""
        if kind == "count":
            return str(len(lesions))
        if kind == "presence":
            return "yes" if lesions else "no"
        if not lesions:
            return "none"
        _r, c, _area = max(lesions, key=lambda t: t[2])
        return "left" if c < width / 2 else "right"

    def apply(self, params: dict[str, Any], u: np.ndarray, extra: dict[str, Any]) -> dict[str, Any]:
        u64 = u.astype(np.float64)
        labels, _n = ndimage.label(u64 > params["threshold"])
        lesions = []
        min_area = max(1, int(MIN_AREA * u.size / (SHAPE[0] * SHAPE[1])))  # 4 pixels at full size, scaled
        for k, sl in enumerate(ndimage.find_objects(labels), start=1):
            area = int((labels[sl] == k).sum()) if sl is not None else 0
            if min_area <= area <= 0.3 * u.size:
                lesions.append((sl[0].start, sl[1].start, area))
        margin = float(np.min(np.abs(u64 - params["threshold"])))
        return {"answer": self._answer(extra["type"], lesions, u.shape[1]), "confidence": round(sigmoid(8 * margin), 6)}

    def to_alt(self, out: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
        return {**out, "answer": extra["choices"].index(out["answer"])}

    def from_alt(self, out: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
        ans = out["answer"]
        return {**out, "answer": extra["choices"][ans] if isinstance(ans, int) else ans}

    def contract(self, shape: tuple[int, ...]) -> dict[str, Any]:
        return {"format": "json", "fields": {"answer": "one of the question's choices (text)", "confidence": "float"}}

    def check_case(self, pred: Any, contract: dict[str, Any]) -> list[str]:
        if not isinstance(pred, dict):
            return ["prediction is not a JSON object"]
        issues = check_confidence(pred)
        choices = contract.get("choices")
        if not isinstance(pred.get("answer"), str) or (choices and pred["answer"] not in choices):
            issues.append(f"answer {pred.get('answer')!r} is not one of the choices {choices}")
        return issues

    def degenerate(self, preds: dict[str, Any]) -> str | None:
        return is_saturated(preds)

    def score(self, preds, truths, extras) -> tuple[float, dict[str, float]]:
        cases = sorted(truths)
        em = exact_match(
            [preds[c].get("answer", "") if isinstance(preds[c], dict) else "" for c in cases],
            [truths[c] for c in cases],
        )
        return em, {"exact_match": em}
