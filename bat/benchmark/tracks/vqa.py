"""VQA track: image + question (count / presence / side) -> answer string (exact match)."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import ndimage

from bat.benchmark.metrics import exact_match
from bat.benchmark.tracks.base import CaseData, Track, check_confidence, is_saturated, sigmoid

SHAPE = (16, 16)
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

    def make_case(self, rng: np.random.Generator, modality: str) -> CaseData:
        prof = self.profiles[modality]
        img = np.full(SHAPE, prof["bg"]) + rng.normal(0, 0.02, SHAPE)
        count = int(rng.integers(0, 4))
        spots = [(2, 2), (2, 10), (10, 2), (10, 10)]
        chosen = [spots[i] for i in rng.permutation(4)[:count]]
        sizes = rng.permutation([3, 4, 5])[:count]
        for (r, c), s in zip(chosen, sizes):
            img[r : r + s, c : c + s] = prof["fg"] + rng.normal(0, 0.02, (s, s))
        kind = str(rng.choice(sorted(QUESTIONS)))
        question, choices = QUESTIONS[kind]
        answer = self._answer(kind, [(r, c, s * s) for (r, c), s in zip(chosen, sizes)])
        return CaseData(
            unit=np.clip(img, 0, 1).astype(np.float32),
            truth=answer,
            extra={"question": question, "choices": choices, "type": kind},
        )

    @staticmethod
    def _answer(kind: str, lesions: list[tuple[float, float, int]]) -> str:
        if kind == "count":
            return str(len(lesions))
        if kind == "presence":
            return "yes" if lesions else "no"
        if not lesions:
            return "none"
        _r, c, _area = max(lesions, key=lambda t: t[2])
        return "left" if c < SHAPE[1] / 2 else "right"

    def apply(self, params: dict[str, Any], u: np.ndarray, extra: dict[str, Any]) -> dict[str, Any]:
        u64 = u.astype(np.float64)
        labels, _n = ndimage.label(u64 > params["threshold"])
        lesions = []
        for k, sl in enumerate(ndimage.find_objects(labels), start=1):
            area = int((labels[sl] == k).sum()) if sl is not None else 0
            if 4 <= area <= 0.3 * u.size:
                lesions.append((sl[0].start, sl[1].start, area))
        margin = float(np.min(np.abs(u64 - params["threshold"])))
        return {"answer": self._answer(extra["type"], lesions), "confidence": round(sigmoid(8 * margin), 6)}

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
