"""What a track defines: modality profiles, case generator, a parametric "model", contract checks, metric.

A track works in *unit space*: clean inputs lie in [0, 1]. The instance layer adds the pitfalls (raw
scanner units, NaN cases, swapped layout) around these functions; models are plain numpy/scipy code.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class CaseData:
    """One generated case: clean unit-space input, hidden truth, optional public extras (e.g. a question)."""

    unit: np.ndarray
    truth: Any
    extra: dict[str, Any] = field(default_factory=dict)


def scaled(n: int, fraction: float) -> int:
    """`n` capped at `fraction` of itself (floor; a tiny epsilon absorbs float error such as 20 * 0.35)."""
    return int(n * fraction + 1e-9)


def sigmoid(x: float) -> float:
    """Logistic function on a float (saturates to exactly 1.0 for large inputs)."""
    return float(1.0 / (1.0 + np.exp(-np.clip(x, -700, 700))))


class Track(ABC):
    """One benchmark track. Subclasses set the class attributes and implement the methods."""

    name: str
    title: str
    metric: str
    output_kind: str  # "json" (labels, boxes, text, answers) or "npy" (arrays)
    profiles: dict[str, dict[str, Any]]
    """Modality -> model parameters that fit that modality (data of a modality follows its profile)."""
    behaviour: str
    """One line for the model card: what the model computes."""
    alt_note: str
    """Model-card line describing the model's native output layout when it differs from the contract."""
    shape: tuple[int, ...]
    """Full-size case geometry (the input array's shape; synthesis: the high-resolution truth's)."""
    min_input_fraction: float = 0.5
    """Smallest input fraction (lambda_input of Eq. 12) at which the track still makes cases the expert solves."""

    def case_shape(self, fraction: float = 1.0) -> tuple[int, ...]:
        """The case geometry at input `fraction` (Eq. 12 lambda_input, a fraction of the input's size in elements):
        every axis scaled by fraction ** (1 / ndim) and floored, so an input holds at most `fraction` of the
        source's elements; 1.0 gives `shape` itself."""
        return tuple(scaled(n, fraction ** (1 / len(self.shape))) for n in self.shape)

    def fraction_problem(self, fraction: float) -> str | None:
        """Why the track cannot make cases at input `fraction` (None: it can); the message names the valid range."""
        if self.min_input_fraction <= fraction <= 1.0:
            return None
        return (
            f"input_fraction {fraction} is outside what the {self.name} track can make; "
            f"valid: {self.min_input_fraction} <= input_fraction <= 1.0"
        )

    @abstractmethod
    def make_case(self, rng: np.random.Generator, modality: str, shape: tuple[int, ...] | None = None) -> CaseData:
        """Generate one case of `modality` with geometry `shape` (a `case_shape`; None: the full `shape`)."""

    @abstractmethod
    def apply(self, params: dict[str, Any], u: np.ndarray, extra: dict[str, Any]) -> Any:
        """Run the model with `params` on a (normalised) input; output in the contract layout."""

    @abstractmethod
    def to_alt(self, out: Any, extra: dict[str, Any]) -> Any:
        """Contract layout -> the model's alternative native layout (the layout pitfall)."""

    @abstractmethod
    def from_alt(self, out: Any, extra: dict[str, Any]) -> Any:
        """Alternative native layout -> contract layout (what `match_contract=true` does)."""

    @abstractmethod
    def contract(self, shape: tuple[int, ...]) -> dict[str, Any]:
        """Output section of spec.json for inputs of `shape`."""

    @abstractmethod
    def check_case(self, pred: Any, contract: dict[str, Any]) -> list[str]:
        """Format problems of one prediction against the contract (empty = fine)."""

    @abstractmethod
    def degenerate(self, preds: dict[str, Any]) -> str | None:
        """A message when predictions over the checked cases are degenerate (constant, saturated, empty)."""

    @abstractmethod
    def score(
        self, preds: dict[str, Any], truths: dict[str, Any], extras: dict[str, dict[str, Any]]
    ) -> tuple[float, dict[str, float]]:
        """Task score in [0, 1] and named metrics from complete predictions and hidden truths."""

    def nan_output(self, out: Any) -> Any:
        """What the model emits when its input contained NaN (NaN propagates like in a network)."""
        if isinstance(out, np.ndarray):
            return np.full(out.shape, np.nan, dtype=np.float32)
        if isinstance(out, dict):
            return {
                k: float("nan") if k == "confidence" else ([] if isinstance(v, list) else "nan") for k, v in out.items()
            }
        return out


def is_saturated(preds: dict[str, Any]) -> str | None:
    """Degeneracy of confidence-bearing JSON predictions: every checked case at confidence >= 0.9999."""
    confs = [p.get("confidence") for p in preds.values() if isinstance(p, dict)]
    finite = [c for c in confs if isinstance(c, (int, float)) and np.isfinite(c)]
    if finite and len(finite) == len(confs) and min(finite) >= 0.9999:
        return f"every checked case has confidence {min(finite):.4f} (saturated): input is probably not normalised"
    return None


def check_confidence(pred: dict[str, Any]) -> list[str]:
    """Problems with the `confidence` field of a JSON prediction."""
    conf = pred.get("confidence")
    if not isinstance(conf, (int, float)) or isinstance(conf, bool):
        return ["missing numeric 'confidence'"]
    if not np.isfinite(conf):
        return ["confidence is NaN (non-finite model output)"]
    if not 0.0 <= conf <= 1.0:
        return [f"confidence {conf} outside [0, 1]"]
    return []


def check_array(pred: Any, contract: dict[str, Any]) -> list[str]:
    """Shape / finiteness / range problems of an array prediction."""
    if not isinstance(pred, np.ndarray):
        return ["prediction is not an array"]
    issues = []
    want = tuple(contract["shape"])
    if pred.shape != want:
        issues.append(
            f"shape {list(pred.shape)} does not match contract {list(want)} (axis order {contract.get('axes', '')})"
        )
    if pred.dtype.kind == "f" and not np.all(np.isfinite(pred)):
        issues.append(f"{int(np.sum(~np.isfinite(pred)))} non-finite values")
    elif "range" in contract:
        lo, hi = contract["range"]
        if pred.size and (float(pred.min()) < lo - 1e-6 or float(pred.max()) > hi + 1e-6):
            issues.append(
                f"values [{float(pred.min()):.3g}, {float(pred.max()):.3g}] outside contract range [{lo}, {hi}]"
            )
    return issues


def constant_arrays(preds: dict[str, Any]) -> str | None:
    """Degeneracy of array predictions: every checked case constant."""
    arrays = [p for p in preds.values() if isinstance(p, np.ndarray) and p.size and np.all(np.isfinite(p))]
    if arrays and len(arrays) == len(preds) and all(float(a.max()) == float(a.min()) for a in arrays):
        return f"every checked output is constant ({float(arrays[0].flat[0]):.3g}): input is probably not normalised"
    return None
