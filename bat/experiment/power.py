"""How large a gap between two arms an experiment's end-of-run evaluation can resolve, from its held-out runs.

Reads each arm x seed's `experiment_arm.json` (its `final_round`) and the held-out run records of that round's
end-of-run evaluation (`heldout/round_NN/<split>/runs.jsonl`); writes nothing. Every arm and seed of an experiment
is evaluated on the same instances with the same sampling seeds (the experiment's held-out secret), so run `r` of
one arm and run `r` of another face the same instance: the per-run difference (each arm's score averaged over its
seeds) is a paired sample. From its SD this reports the paired mean difference with a t half-width over runs, the
smallest gap that many runs detect at a given power (two-sided paired t test, approximated as
`(t_{1-a/2} + t_{power}) * sd / sqrt(n)` with n - 1 degrees of freedom, i.e. without the noncentral t), and the
runs per split a given gap needs.

Reporting only, run by hand next to an experiment's state (it opens held-out files): no phase imports it and
nothing it prints feeds training or routing.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path
from typing import Any

from scipy import stats

from bat.evaluate.aggregate import half_width
from bat.schemas.evaluation import METRICS

MAX_RUNS = 100_000
"""Upper bound of the search in `runs_needed` (a gap this small is reported as out of reach)."""


class PowerInputError(ValueError):
    """An arm directory or run record that cannot be paired; the message names the file and what to do."""


def arm_run_scores(arm_dirs: list[Path], split: str, metric: str = "overall") -> dict[str, tuple[str, float]]:
    """run_id -> (instance_id, `metric` averaged over the given arm x seed directories) on `split`.

    Each directory is one seed of one arm (`experiment_arm.json` with status `done`); the runs are those of its
    end-of-run evaluation. Raises `PowerInputError` for an unfinished arm, a missing run file, an infrastructure-null
    score, or seeds whose run ids or instances differ (not the same experiment).
    """
    from bat.evaluate.store import heldout_runs_path, read_heldout_runs
    from bat.experiment.records import read_record
    from bat.schemas.experiment import ArmRecord
    from bat.state.errors import StateFileError
    from bat.state.experiment_layout import ExperimentRunFiles
    from bat.state.layout import RunLayout

    if metric not in METRICS:
        raise PowerInputError(f"unknown metric {metric!r}; valid: {list(METRICS)}")
    per_seed: list[dict[str, tuple[str, float]]] = []
    for arm_dir in arm_dirs:
        record_path = ExperimentRunFiles(Path(arm_dir)).arm_record
        try:
            record = read_record(record_path, ArmRecord)
        except StateFileError as exc:
            raise PowerInputError(str(exc)) from None
        if record is None:
            raise PowerInputError(f"{record_path}: not found; pass an arm x seed state directory of `bat experiment`")
        if record.status != "done" or record.final_round is None:
            raise PowerInputError(f"{record_path}: status {record.status!r}; finish the arm x seed first")
        layout = RunLayout(Path(arm_dir))
        path = heldout_runs_path(layout, record.final_round, split)
        if not path.exists():
            raise PowerInputError(f"{path}: not found; the end-of-run evaluation kept no raw runs on this split")
        scores: dict[str, tuple[str, float]] = {}
        for run in read_heldout_runs(layout, record.final_round, split):
            value = getattr(run, metric)
            if value is None:
                raise PowerInputError(f"{path}: run {run.run_id} has a null {metric} ({run.null_reason}); rerun it")
            scores[run.run_id] = (run.instance_id, float(value))
        problem = run_alignment(per_seed[0], scores) if per_seed else ""
        if problem:
            raise PowerInputError(f"{path}: {problem} (the first directory's); same experiment?")
        per_seed.append(scores)
    if not per_seed:
        raise PowerInputError("no arm directory given")
    return seed_average(per_seed)


def seed_average(per_seed: list[dict[str, tuple[str, float | None]]]) -> dict[str, tuple[str, float]]:
    """run_id -> (instance_id, score averaged over seeds) from one {run_id: (instance_id, score)} per seed.
    Raises `PowerInputError` when there is no seed, a score is null, or the seeds' runs cannot be paired."""
    if not per_seed:
        raise PowerInputError("no seed given")
    for index, scores in enumerate(per_seed):
        problem = run_alignment(per_seed[0], scores)
        if problem:
            raise PowerInputError(f"seed {index + 1}: {problem} (the first seed's); same experiment?")
        nulls = sorted(run_id for run_id, (_, value) in scores.items() if value is None)
        if nulls:
            raise PowerInputError(f"seed {index + 1}: {len(nulls)} run(s) with a null score (first: {nulls[0]})")
    return {
        run_id: (instance, statistics.fmean(float(seed[run_id][1]) for seed in per_seed))  # type: ignore[arg-type]
        for run_id, (instance, _) in sorted(per_seed[0].items())
    }


def run_alignment(a: dict[str, tuple[str, Any]], b: dict[str, tuple[str, Any]]) -> str:
    """Why two run sets cannot be paired ('' when they can): run ids or their instances differ."""
    if set(a) != set(b):
        return f"run ids differ ({len(set(a) ^ set(b))} not in both)"
    moved = sorted(run_id for run_id in a if a[run_id][0] != b[run_id][0])
    return f"{len(moved)} runs face other instances (first: {moved[0]})" if moved else ""


def minimum_detectable_difference(sd: float, n: int, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest true mean difference a two-sided paired t test over `n` runs with per-run SD `sd` detects with
    probability `power` at level `alpha`."""
    if n < 2:
        return math.inf
    df = n - 1
    return (stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(power, df)) * sd / math.sqrt(n)


def runs_needed(sd: float, gap: float, *, alpha: float = 0.05, power: float = 0.8) -> int | None:
    """Fewest paired runs whose minimum detectable difference is at most `gap` (None beyond `MAX_RUNS`); the
    difference falls as runs grow, so a bisection over [2, MAX_RUNS] finds it."""

    def detects(n: int) -> bool:
        return minimum_detectable_difference(sd, n, alpha=alpha, power=power) <= gap

    if not detects(MAX_RUNS):
        return None
    low, high = 2, MAX_RUNS
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if detects(mid) else (mid + 1, high)
    return low


def _zero_if_rounding(delta: float) -> float:
    """0.0 for a difference below `_ROUNDING` (scores are on [0, 1] with far coarser steps), else `delta`."""
    return 0.0 if abs(delta) <= _ROUNDING else delta


_ROUNDING = 1e-9


def paired_comparison(
    a: dict[str, tuple[str, float]],
    b: dict[str, tuple[str, float]],
    *,
    confidence: float = 0.95,
    power: float = 0.8,
    gaps: tuple[float, ...] = (),
) -> dict[str, Any]:
    """Paired over runs, `a - b`: mean, SD, t half-width and p value of the per-run differences, how many runs
    differ at all, the minimum detectable difference at `power`, and the runs needed for each of `gaps` (scores on
    [0, 1], as are the gaps)."""
    problem = run_alignment(a, b)
    if problem:
        raise PowerInputError(f"the two arms cannot be paired: {problem}")
    # scores averaged over seeds carry float rounding (a mean of three equal scores need not equal the score)
    deltas = [_zero_if_rounding(a[run_id][1] - b[run_id][1]) for run_id in sorted(a)]
    n = len(deltas)
    if n < 2:
        raise PowerInputError(f"{n} paired run(s); at least 2 are needed")
    sd = statistics.stdev(deltas)
    alpha = 1 - confidence
    return {
        "n_runs": n,
        "mean_delta": statistics.fmean(deltas),
        "sd_delta": sd,
        "half_width": half_width(deltas, confidence),
        "p_value": 1.0 if sd == 0 else float(stats.ttest_1samp(deltas, 0.0).pvalue),
        "runs_differing": sum(1 for d in deltas if d != 0.0),
        "minimum_detectable": float(minimum_detectable_difference(sd, n, alpha=alpha, power=power)),
        "runs_needed": {gap: runs_needed(sd, gap, alpha=alpha, power=power) for gap in gaps},
    }


def unpaired_comparison(
    a: list[float], b: list[float], *, confidence: float = 0.95, power: float = 0.8
) -> dict[str, Any]:
    """Unpaired (Welch), `a - b`, for two arms whose runs faced different instances (another held-out suite): mean
    difference, Welch t half-width and p value, each side's per-run SD and count, and the smallest gap these runs
    detect at `power` (`(t_{1-a/2} + t_{power}) * se` with Welch-Satterthwaite degrees of freedom)."""
    if len(a) < 2 or len(b) < 2:
        raise PowerInputError(f"{len(a)} and {len(b)} run(s); an unpaired comparison needs at least 2 on each side")
    sd_a, sd_b = statistics.stdev(a), statistics.stdev(b)
    va, vb = sd_a**2 / len(a), sd_b**2 / len(b)
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1)) if se > 0 else len(a) + len(b) - 2
    alpha = 1 - confidence
    return {
        "design": "unpaired",
        "n_runs": [len(a), len(b)],
        "mean_delta": statistics.fmean(a) - statistics.fmean(b),
        "sd": [sd_a, sd_b],
        "half_width": float(stats.t.ppf(1 - alpha / 2, df) * se),
        "p_value": 1.0 if se == 0 else float(stats.ttest_ind(a, b, equal_var=False).pvalue),
        "minimum_detectable": float((stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(power, df)) * se),
    }


def _parse_arm(text: str) -> tuple[str, list[Path]]:
    name, sep, dirs = text.partition("=")
    if not sep or not name or not dirs:
        raise PowerInputError(f"--arm {text!r}: expected NAME=DIR[,DIR...] (one arm x seed state directory per seed)")
    return name, [Path(d) for d in dirs.split(",") if d]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bat.experiment.power", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--arm",
        action="append",
        required=True,
        metavar="NAME=DIR[,DIR...]",
        help="an arm and its seeds' state directories (repeat for each arm)",
    )
    parser.add_argument("--reference", help="arm every other arm is compared against (default: the first --arm)")
    parser.add_argument("--split", default="final", choices=("final", "test"))
    parser.add_argument("--metric", default="overall", choices=METRICS)
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--power", type=float, default=0.8)
    parser.add_argument(
        "--gap",
        type=float,
        action="append",
        metavar="POINTS",
        help="gaps (0-100 points) to size the split for; default 10 and 20",
    )
    args = parser.parse_args(argv)
    from bat.state.errors import StateFileError

    try:
        arms = dict(_parse_arm(text) for text in args.arm)
        reference = args.reference or next(iter(arms))
        if reference not in arms:
            raise PowerInputError(f"--reference {reference!r} is not an --arm; valid: {list(arms)}")
        scores = {name: arm_run_scores(dirs, args.split, args.metric) for name, dirs in arms.items()}
        gaps = tuple(g / 100 for g in (args.gap or [10.0, 20.0]))
        rows = [
            (
                name,
                paired_comparison(
                    scores[reference], scores[name], confidence=args.confidence, power=args.power, gaps=gaps
                ),
            )
            for name in arms
            if name != reference
        ]
    except (PowerInputError, StateFileError) as exc:
        print(f"bat.experiment.power: {exc}", file=sys.stderr)
        return 2
    print(f"split {args.split}, {args.metric}, 0-100 points; paired over runs (same instance and sampling seed)")
    for name, values in scores.items():
        mean = 100 * statistics.fmean(v for _, v in values.values())
        print(f"  {name}: {mean:.1f} over {len(values)} runs ({len(arms[name])} seed(s) averaged per run)")
    for name, c in rows:
        needed = ", ".join(
            f"{100 * g:g} points: {n if n is not None else f'> {MAX_RUNS}'} runs" for g, n in c["runs_needed"].items()
        )
        print(
            f"  {reference} - {name}: {100 * c['mean_delta']:+.1f} +- {100 * c['half_width']:.1f} "
            f"(p {c['p_value']:.2f}; {c['runs_differing']}/{c['n_runs']} runs differ; per-run SD "
            f"{100 * c['sd_delta']:.1f}); detectable at power {args.power:g}: {100 * c['minimum_detectable']:.1f}; "
            f"runs needed for {needed}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
