"""The pre-registered analysis of an arm against its shuffled-reward twin (docs/results/rl_teaches/PREREGISTRATION.md).

C1 training reward: rise = mean true reward over the last window minus the first, per run; arm minus twin, mean
   over seeds, passed at >= +0.15; 95 % bootstrap interval resampling the steps within each window of each run.
C2 held-out stage probe at the last probed step: per probe state, arm minus twin (x 100, seeds averaged); passed
   at a mean >= +10 with a two-sided paired t-test p < 0.01 over states (Wilcoxon p beside it).
C3 held-out E2E finish rate: arm minus twin over the same run ids (seeds averaged per run); passed when the 95 %
   paired bootstrap interval over run ids lies above 0.
A criterion a missing unit would need is reported undecided (`passed: None`). Reads `TwinUnit`s; writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bat.schemas.twin_study import Criterion, TwinResults, TwinUnit

RESAMPLES = 10_000
WINDOW = 10
RISE_MIN = 0.15
PROBE_MIN = 10.0
PROBE_P = 0.01


def _rng(name: str) -> np.random.Generator:
    """A bootstrap generator fixed by the criterion's name (the analysis is deterministic)."""
    return np.random.default_rng(sum(ord(c) * (i + 1) for i, c in enumerate(name)))


def _steps(rewards: Sequence[float | None]) -> np.ndarray:
    """Step rewards as floats, a step without a valid rollout (None) as NaN (left out of every window mean)."""
    return np.asarray([np.nan if r is None else r for r in rewards], dtype=float)


def rise(rewards: Sequence[float | None], window: int = WINDOW) -> float:
    """Mean of the last `window` step rewards minus the mean of the first `window` (steps without a reward, None,
    left out)."""
    values = _steps(rewards)
    return float(np.nanmean(values[-window:]) - np.nanmean(values[:window]))


def c1_training(arm: Sequence[TwinUnit], twin: Sequence[TwinUnit], window: int = WINDOW) -> Criterion:
    """C1 over the seeds both arms have (paired by seed)."""
    rule = f"rise (last {window} steps - first {window}) of arm - twin >= +{RISE_MIN}"
    pairs = [(a, t) for a in arm for t in twin if a.seed == t.seed and len(a.rewards) >= 2 * window <= len(t.rewards)]
    if not pairs:
        return Criterion(name="C1 training reward", rule=rule, value=None, passed=None)
    value = float(np.mean([rise(a.rewards, window) - rise(t.rewards, window) for a, t in pairs]))
    rng = _rng("c1")
    draws = np.zeros(RESAMPLES)
    for a, t in pairs:
        for unit, sign in ((a, 1.0), (t, -1.0)):
            values = _steps(unit.rewards)
            first, last = values[:window], values[-window:]
            lo = np.nanmean(first[rng.integers(0, window, (RESAMPLES, window))], axis=1)
            hi = np.nanmean(last[rng.integers(0, window, (RESAMPLES, window))], axis=1)
            draws += sign * (hi - lo)
    draws /= len(pairs)
    interval = (float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5)))
    return Criterion(
        name="C1 training reward",
        rule=rule,
        value=value,
        interval=interval,
        passed=value >= RISE_MIN,
        detail={"seeds": len(pairs)},
    )


def _seed_mean(units: Sequence[TwinUnit], step: int) -> list[float | None]:
    rows = [u.probe[step] for u in units if step in u.probe]
    out: list[float | None] = []
    for column in zip(*rows):
        values = [v for v in column if v is not None]
        out.append(float(np.mean(values)) if values else None)
    return out


def c2_probe(arm: Sequence[TwinUnit], twin: Sequence[TwinUnit], step: int) -> Criterion:
    """C2 at probed step `step`, paired by probe state."""
    from scipy import stats

    rule = f"probe at step {step}: arm - twin >= +{PROBE_MIN} points, paired t-test p < {PROBE_P}"
    a, t = _seed_mean(arm, step), _seed_mean(twin, step)
    diffs = [100.0 * (x - y) for x, y in zip(a, t) if x is not None and y is not None]
    if len(diffs) < 2:
        return Criterion(name="C2 held-out stage probe", rule=rule, value=None, passed=None)
    value = float(np.mean(diffs))
    test = stats.ttest_1samp(diffs, 0.0)
    half = float(stats.t.ppf(0.975, len(diffs) - 1) * np.std(diffs, ddof=1) / np.sqrt(len(diffs)))
    nonzero = [d for d in diffs if d != 0]
    wilcoxon = float(stats.wilcoxon(nonzero).pvalue) if len(nonzero) >= 2 else None
    p = float(test.pvalue) if np.isfinite(test.pvalue) else None
    return Criterion(
        name="C2 held-out stage probe",
        rule=rule,
        value=value,
        interval=(value - half, value + half),
        p=p,
        passed=bool(value >= PROBE_MIN and p is not None and p < PROBE_P),
        detail={"states": len(diffs), "wilcoxon_p": wilcoxon},
    )


def _finish_by_run(units: Sequence[TwinUnit]) -> dict[str, float]:
    runs: dict[str, list[float]] = {}
    for u in units:
        for run_id, run in u.e2e.items():
            runs.setdefault(run_id, []).append(1.0 if run.finished else 0.0)
    return {k: float(np.mean(v)) for k, v in runs.items()}


def c3_finish(arm: Sequence[TwinUnit], twin: Sequence[TwinUnit]) -> Criterion:
    """C3 over the run ids both arms were scored on."""
    rule = "held-out E2E finish rate, arm - twin: 95 % paired bootstrap interval above 0"
    a, t = _finish_by_run(arm), _finish_by_run(twin)
    ids = sorted(set(a) & set(t))
    if not ids:
        return Criterion(name="C3 held-out E2E finish rate", rule=rule, value=None, passed=None)
    diffs = np.asarray([a[i] - t[i] for i in ids])
    draws = diffs[_rng("c3").integers(0, len(ids), (RESAMPLES, len(ids)))].mean(axis=1)
    interval = (float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5)))
    return Criterion(
        name="C3 held-out E2E finish rate",
        rule=rule,
        value=float(diffs.mean()),
        interval=interval,
        passed=interval[0] > 0,
        detail={
            "runs": len(ids),
            "arm": float(np.mean([a[i] for i in ids])),
            "twin": float(np.mean([t[i] for i in ids])),
        },
    )


def _overall(units: Sequence[TwinUnit]) -> float | None:
    values = [r.overall for u in units for r in u.e2e.values() if r.overall is not None]
    return 100.0 * float(np.mean(values)) if values else None


def analyse(
    units: Sequence[TwinUnit], *, arm: str, twin: str, reference: str, seeds: Sequence[int], steps: int, probe_step: int
) -> TwinResults:
    """Every criterion from the units present; lists the units missing (an incomplete study decides nothing)."""
    by = {(u.arm, u.seed): u for u in units}
    a = [by[(arm, s)] for s in seeds if (arm, s) in by]
    t = [by[(twin, s)] for s in seeds if (twin, s) in by]
    missing = [
        f"{n} seed {s}" for n in (arm, twin) for s in seeds if (n, s) not in by or len(by[(n, s)].rewards) < steps
    ]
    missing += [
        f"{n} seed {s}: probe at step {probe_step}"
        for n in (arm, twin)
        for s in seeds
        if (n, s) in by and probe_step not in by[(n, s)].probe
    ]
    missing += [f"{n} seed {s}: E2E runs" for n in (arm, twin) for s in seeds if (n, s) in by and not by[(n, s)].e2e]
    ref = [u for u in units if u.arm == reference]
    if not ref or not ref[0].e2e:
        missing.append(f"{reference}: E2E runs")
    complete = not missing
    criteria = [c1_training(a, t), c2_probe(a, t, probe_step), c3_finish(a, t)]
    if not complete:
        criteria = [c.model_copy(update={"passed": None}) for c in criteria]
    return TwinResults(
        arm=arm,
        twin=twin,
        seeds=list(seeds),
        complete=complete,
        missing=missing,
        criteria=criteria,
        overall={arm: _overall(a), twin: _overall(t), reference: _overall(ref)},
    )


def probe_mean(values: list[float | None]) -> float | None:
    """Mean over probe states with a score, x 100 (None without one)."""
    kept = [v for v in values if v is not None]
    return 100.0 * float(np.mean(kept)) if kept else None
