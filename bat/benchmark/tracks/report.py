"""Report track: 2D chest images with findings in fixed regions -> templated report text (keyword F1)."""

from __future__ import annotations

from typing import Any

import numpy as np

from bat.benchmark.metrics import keyword_f1, keywords_in
from bat.benchmark.tracks.base import CaseData, Track, check_confidence, is_saturated, sigmoid

SHAPE = (20, 20)
FINDINGS = ("opacity", "nodule", "effusion", "cardiomegaly")


def regions(shape: tuple[int, ...]) -> tuple[tuple[slice, slice], ...]:
    """The four finding regions (quadrants less a one-pixel border and a two-pixel cross) of an image of `shape`;
    (20, 20) gives rows/columns 1:9 and 11:19."""
    (h, w), hy, hx = shape, shape[0] // 2, shape[1] // 2
    top, bottom, left, right = slice(1, hy - 1), slice(hy + 1, h - 1), slice(1, hx - 1), slice(hx + 1, w - 1)
    return ((top, left), (top, right), (bottom, left), (bottom, right))


REGIONS = regions(SHAPE)


def render(found: list[str]) -> str:
    """The report template the model fills in."""
    return "Findings: " + ", ".join(found) + "." if found else "Findings: none."


class Report(Track):
    name = "report"
    title = "structured reporting"
    metric = "keyword F1"
    output_kind = "json"
    profiles = {
        "chest-xray": {"bg": 0.10, "fg": 0.45, "threshold": 0.28},
        "chest-ct-mip": {"bg": 0.35, "fg": 0.65, "threshold": 0.50},
        "lung-ultrasound": {"bg": 0.60, "fg": 0.95, "threshold": 0.78},
    }
    behaviour = (
        "per-region lesion score (mean of the brightest quarter of pixels) against a threshold -> report template"
    )
    alt_note = "writes finding CODES (F0..F3 in the card's finding order) instead of finding words"
    shape = SHAPE
    min_input_fraction = 0.25

    def make_case(self, rng: np.random.Generator, modality: str, shape: tuple[int, ...] | None = None) -> CaseData:
        """A lesion in the region of each present finding, half the region's height and width (rounded up: 4 x 4
        at full size), so it fills the brightest quarter the model scores at every size."""
        shape = shape or SHAPE
        prof = self.profiles[modality]
        img = np.full(shape, prof["bg"]) + rng.normal(0, 0.02, shape)
        present = [k for k in range(len(FINDINGS)) if rng.random() < 0.45] or [int(rng.integers(0, len(FINDINGS)))]
        for k in present:
            rs, cs = regions(shape)[k]
            h, w = (rs.stop - rs.start + 1) // 2, (cs.stop - cs.start + 1) // 2
            r, c = int(rng.integers(rs.start, rs.stop - h)), int(rng.integers(cs.start, cs.stop - w))
            img[r : r + h, c : c + w] = prof["fg"] + rng.normal(0, 0.02, (h, w))
        return CaseData(unit=np.clip(img, 0, 1).astype(np.float32), truth=[FINDINGS[k] for k in sorted(present)])

    def apply(self, params: dict[str, Any], u: np.ndarray, extra: dict[str, Any]) -> dict[str, Any]:
        found, margins = [], []
        for name, (rs, cs) in zip(FINDINGS, regions(u.shape)):
            region = np.sort(u[rs, cs].astype(np.float64).ravel())
            score = float(region[-region.size // 4 :].mean())
            margins.append(sigmoid(8 * abs(score - params["threshold"])))
            if score > params["threshold"]:
                found.append(name)
        return {"report": render(found), "confidence": round(min(margins), 6)}

    def to_alt(self, out: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
        text = out["report"]
        for k, word in enumerate(FINDINGS):
            text = text.replace(word, f"F{k}")
        return {**out, "report": text}

    def from_alt(self, out: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
        text = out["report"]
        for k, word in enumerate(FINDINGS):
            text = text.replace(f"F{k}", word)
        return {**out, "report": text}

    def contract(self, shape: tuple[int, ...]) -> dict[str, Any]:
        return {
            "format": "json",
            "fields": {"report": "text 'Findings: <words>.'", "confidence": "float"},
            "vocabulary": list(FINDINGS),
            "min_findings": 1,
        }

    def check_case(self, pred: Any, contract: dict[str, Any]) -> list[str]:
        if not isinstance(pred, dict) or not isinstance(pred.get("report"), str):
            return ["prediction needs a 'report' string"]
        issues = check_confidence(pred)
        if not keywords_in(pred["report"], contract["vocabulary"]):
            issues.append(
                f"report names none of the contract findings {contract['vocabulary']}: {pred['report'][:60]!r}"
            )
        return issues

    def degenerate(self, preds: dict[str, Any]) -> str | None:
        return is_saturated(preds)

    def score(self, preds, truths, extras) -> tuple[float, dict[str, float]]:
        f1 = [
            keyword_f1(preds[c].get("report", "") if isinstance(preds[c], dict) else "", truths[c], FINDINGS)
            for c in sorted(truths)
        ]
        return float(np.mean(f1)), {"keyword_f1": float(np.mean(f1))}
