"""Two-level aggregation of held-out runs: mean of repeats within a track, then mean of track means.

Everything stays on [0, 1] and unrounded; half-widths are t-based across track means (scipy). A metric with
any infrastructure-null cell is None (never silently averaged over the remaining runs) and the cell is listed.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from bat.schemas.evaluation import METRICS, EvalAggregate, EvalRun, NullCell, TrackAggregate


def run_metrics(
    stages: Mapping[str, float | None], task: float | None, weights: Mapping[str, float], *, breach: bool = False
) -> tuple[float | None, float | None]:
    """Per-run (Agentic, Overall): stage weights renormalised over applicable stages (keys present in `stages`).

    A null stage or a null task makes the dependent metric null. A breach zeroes both.
    """
    unknown = sorted(set(stages) - set(weights))
    if unknown:
        raise ValueError(f"unknown stage keys {unknown}; valid: {list(weights)}")
    if breach:
        return 0.0, 0.0
    applicable = [k for k in weights if k in stages]
    if not applicable:
        raise ValueError(f"run has no applicable stage; expected some of {list(weights)}")
    if any(stages[k] is None for k in applicable):
        agentic = None
    else:
        total = sum(weights[k] for k in applicable)
        agentic = sum(weights[k] * float(stages[k]) for k in applicable) / total  # type: ignore[arg-type]
    overall = None if agentic is None or task is None else 0.5 * float(task) + 0.5 * agentic
    return agentic, overall


def half_width(values: Sequence[float], confidence: float = 0.95) -> float | None:
    """t-based half-width of the mean of `values` (None with fewer than two values)."""
    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    from scipy import stats  # 0.46 s of imports: deferred so the phase graph (every `bat` command) stays light

    return float(stats.t.ppf(0.5 + confidence / 2.0, n - 1) * sd / math.sqrt(n))


def _mean_or_none(values: Iterable[float | None]) -> float | None:
    items = list(values)
    if not items or any(v is None for v in items):
        return None
    return sum(items) / len(items)  # type: ignore[arg-type]


def _track_aggregate(
    track: str, runs: list[EvalRun], stage_keys: Sequence[str]
) -> tuple[TrackAggregate, list[NullCell]]:
    nulls: list[NullCell] = []
    for run in runs:
        for key in stage_keys:
            if key in run.stages and run.stages[key] is None:
                nulls.append(NullCell(track=track, repeat=run.repeat, field=key, reason=run.null_reason))
        if run.task is None:
            nulls.append(NullCell(track=track, repeat=run.repeat, field="task", reason=run.null_reason))
    stages: dict[str, float | None] = {}
    for key in stage_keys:
        applicable = [r.stages[key] for r in runs if key in r.stages]
        if applicable:
            stages[key] = _mean_or_none(applicable)
    agg = TrackAggregate(
        track=track,
        n_runs=len(runs),
        n_null=len({(c.repeat) for c in nulls}),
        stages=stages,
        task=_mean_or_none(r.task for r in runs),
        agentic=_mean_or_none(r.agentic for r in runs),
        overall=_mean_or_none(r.overall for r in runs),
        breaches=sum(1 for r in runs if r.breach),
    )
    return agg, nulls


def _across_tracks(values: list[float | None], confidence: float) -> tuple[float | None, float | None]:
    if not values or any(v is None for v in values):
        return None, None
    clean = [float(v) for v in values]  # type: ignore[arg-type]
    return sum(clean) / len(clean), half_width(clean, confidence)


def aggregate_runs(
    runs: Sequence[EvalRun],
    *,
    stage_keys: Sequence[str],
    round_index: int,
    checkpoint: str,
    checkpoint_digest: str,
    suite_version: str,
    harness_version: str,
    manifest_digest: str,
    confidence: float = 0.95,
) -> EvalAggregate:
    """Aggregate one split's runs (all of the same split) into an `EvalAggregate` for the training side."""
    if not runs:
        raise ValueError("no evaluation runs to aggregate")
    splits = sorted({r.split for r in runs})
    if len(splits) != 1:
        raise ValueError(f"runs mix splits {splits}; aggregate one split at a time")
    by_track: dict[str, list[EvalRun]] = defaultdict(list)
    for run in runs:
        by_track[run.track].append(run)
    tracks: dict[str, TrackAggregate] = {}
    null_cells: list[NullCell] = []
    for track in sorted(by_track):
        agg, nulls = _track_aggregate(track, sorted(by_track[track], key=lambda r: r.repeat), stage_keys)
        tracks[track] = agg
        null_cells.extend(nulls)
    values: dict[str, float | None] = {}
    half_widths: dict[str, float | None] = {}
    for metric in METRICS:
        values[metric], half_widths[metric] = _across_tracks([getattr(t, metric) for t in tracks.values()], confidence)
    stages: dict[str, float | None] = {}
    for key in stage_keys:
        per_track = [t.stages[key] for t in tracks.values() if key in t.stages]
        if per_track:
            stages[key], half_widths[key] = _across_tracks(per_track, confidence)
    return EvalAggregate(
        round=round_index,
        split=splits[0],  # type: ignore[arg-type]
        checkpoint=checkpoint,
        checkpoint_digest=checkpoint_digest,
        suite_version=suite_version,
        harness_version=harness_version,
        manifest_digest=manifest_digest,
        stage_keys=list(stage_keys),
        stages=stages,
        task=values["task"],
        agentic=values["agentic"],
        overall=values["overall"],
        half_widths=half_widths,
        confidence=confidence,
        tracks=tracks,
        n_runs=len(runs),
        null_cells=null_cells,
        routable=not null_cells and values["overall"] is not None,
    )


def pct(value: float | None, digits: int = 1) -> str:
    """Render a [0, 1] score on 0-100 with one decimal; `n/a` for None."""
    return "n/a" if value is None else f"{100.0 * value:.{digits}f}"


def pct_delta(a: float | None, b: float | None, digits: int = 1) -> str:
    """Difference b - a on 0-100 computed from unrounded values, rounded once, with a sign."""
    if a is None or b is None:
        return "n/a"
    return f"{100.0 * (b - a):+.{digits}f}"
