"""Paired per-track comparison of two evaluations of the same suite (the track is the statistical unit)."""

from __future__ import annotations

import math

from scipy import stats

from bat.evaluate.aggregate import half_width
from bat.schemas.evaluation import METRICS, EvalAggregate, PairedComparison


def _track_metric(agg: EvalAggregate, track: str, metric: str) -> float | None:
    entry = agg.tracks[track]
    if metric in METRICS:
        return getattr(entry, metric)
    return entry.stages.get(metric)


def paired_compare(
    a: EvalAggregate, b: EvalAggregate, metric: str = "overall", *, confidence: float = 0.95
) -> PairedComparison:
    """Per-track deltas b - a of `metric` (overall/task/agentic or a stage key), their mean, t half-width, p-value.

    Both evaluations must cover the same tracks and suite version; null track values are an error.
    """
    valid = list(METRICS) + list(a.stage_keys)
    if metric not in valid:
        raise ValueError(f"unknown metric {metric!r}; valid: {valid}")
    if a.suite_version != b.suite_version:
        raise ValueError(
            f"suite versions differ ({a.suite_version} vs {b.suite_version}); a paired comparison needs the same suite"
        )
    if set(a.tracks) != set(b.tracks):
        raise ValueError(f"track sets differ: {sorted(a.tracks)} vs {sorted(b.tracks)}")
    deltas: dict[str, float] = {}
    for track in sorted(a.tracks):
        va, vb = _track_metric(a, track, metric), _track_metric(b, track, metric)
        if va is None or vb is None:
            raise ValueError(f"track {track!r} has a null {metric} value; repair null cells before comparing")
        deltas[track] = vb - va
    values = list(deltas.values())
    mean = sum(values) / len(values)
    t_stat = p_value = None
    if len(values) >= 2:
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
        if sd > 0:
            result = stats.ttest_1samp(values, 0.0)
            t_stat, p_value = float(result.statistic), float(result.pvalue)
    return PairedComparison(
        metric=metric,
        a_checkpoint=a.checkpoint,
        b_checkpoint=b.checkpoint,
        deltas=deltas,
        mean_delta=mean,
        half_width=half_width(values, confidence),
        t_stat=t_stat,
        p_value=p_value,
        n_tracks=len(values),
    )
