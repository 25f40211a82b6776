"""Statistics over finished arm x seeds: an arm's summary across seeds and tracks, paired comparisons between arms,
and the held-out stage profile before and after RL.

Reads nothing from disk: every function takes end-of-run aggregates (`EvalAggregate`) or the summaries built from
them. The track is the statistical unit: per-track values are averaged over seeds, the arm mean is the mean of track
means with a t half-width across tracks, and the seed spread is the SD/min/max of seed means.
"""

from __future__ import annotations

import statistics
from typing import Any

from scipy import stats

from bat.evaluate.aggregate import half_width
from bat.schemas.evaluation import METRICS, EvalAggregate
from bat.schemas.experiment_results import ArmResult, ArmSummary, Comparison, HeldOutProfile, StageChange

END_SPLITS = ("final", "test")
"""Splits of the end-of-run evaluation (`final_test` phase); `spec.report_split` picks the table's."""


def _metric(agg_or_track: Any, metric: str) -> float | None:
    return getattr(agg_or_track, metric) if metric in METRICS else agg_or_track.stages.get(metric)


def arm_summary(aggs: list[EvalAggregate], stage_keys: list[str], confidence: float) -> ArmSummary:
    """Mean of seed-averaged track means, t half-width across tracks, and seed spread, per metric."""
    out = ArmSummary(n_seeds=len(aggs), mean={}, half_width={}, seed_sd={}, seed_min={}, seed_max={}, track_means={})
    if not aggs:
        return out
    tracks = sorted(set.intersection(*(set(a.tracks) for a in aggs)))
    for m in [*METRICS, *stage_keys]:
        per_track = {}
        for t in tracks:
            vals = [_metric(a.tracks[t], m) for a in aggs]
            per_track[t] = None if any(v is None for v in vals) else sum(vals) / len(vals)
        seed_vals = [_metric(a, m) for a in aggs]
        if not per_track or any(v is None for v in per_track.values()) or any(v is None for v in seed_vals):
            out.mean[m] = None
            continue
        track_vals = list(per_track.values())
        out.track_means[m] = per_track
        out.mean[m] = sum(track_vals) / len(track_vals)
        out.half_width[m] = half_width(track_vals, confidence)
        out.seed_sd[m] = statistics.stdev(seed_vals) if len(seed_vals) >= 2 else None
        out.seed_min[m], out.seed_max[m] = min(seed_vals), max(seed_vals)
    return out


def compare(ref: ArmSummary, other: ArmSummary, confidence: float, metric: str = "overall") -> Comparison | None:
    """Paired per-track comparison ref - other of seed-averaged track means: mean, t half-width, p-value."""
    a, b = ref.track_means.get(metric), other.track_means.get(metric)
    if not a or not b or set(a) != set(b):
        return None
    deltas = {t: a[t] - b[t] for t in sorted(a)}
    values = list(deltas.values())
    p = None
    if len(values) >= 2 and statistics.stdev(values) > 0:
        p = float(stats.ttest_1samp(values, 0.0).pvalue)
    return Comparison(
        metric=metric,
        deltas=deltas,
        mean_delta=sum(values) / len(values),
        half_width=half_width(values, confidence),
        p_value=p,
        n_tracks=len(values),
    )


def held_out_profile(arms: dict[str, ArmResult], stage_keys: list[str], confidence: float) -> HeldOutProfile | None:
    """Per end-of-run split and RL arm, each stage before RL (the first trained arm without RL rounds, the SFT
    checkpoint every RL arm starts from) and after (the arm's retained best): both means and the paired per-track
    change `after - before` with its half-width (`compare`). None when the experiment has no such `before` arm."""
    before = next((n for n, a in arms.items() if a.kind == "trained" and not a.rl), None)
    if before is None:
        return None
    out = HeldOutProfile(before=before, splits={})
    for split in END_SPLITS:
        base = arms[before].summaries.get(split)
        rows = {}
        for name, arm in arms.items():
            after = arm.summaries.get(split)
            if not arm.rl or base is None or after is None:
                continue
            rows[name] = {
                k: StageChange(
                    before=base.mean.get(k),
                    after=after.mean.get(k),
                    change=compare(after, base, confidence, metric=k),
                )
                for k in stage_keys
            }
        if rows:
            out.splits[split] = rows
    return out
