"""Per-round curves per arm (matplotlib PNGs): raw controller Overall, the best-so-far staircase, and the per-stage
staircase (the paper's Fig. 1c shape).

Reads the `curve` entries of collected results (controller split = the routing evaluation, never final/test).
Writes (atomically) `curves.png`, two panels: raw per round (mean over seeds, thin lines per seed) and the retained
best's score after each round (step plot, mean over seeds); and `stages.png`, one panel per arm: each stage's
controller score per round (mean over seeds).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bat.schemas.experiment import Curve, SeedRun
from bat.schemas.experiment_results import ExperimentResults
from bat.state.atomic import atomic_write_bytes


def counted(seeds: list[SeedRun]) -> list[SeedRun]:
    """The seeds that enter a mean: finished ones (`done`); stale and failed runs are listed, never averaged."""
    return [s for s in seeds if s.done]


def _mean_by_round(seeds: list[SeedRun], pick: Callable[[Curve], list[Any]]) -> tuple[list[int], list[float]]:
    """(rounds, mean over the counted seeds x 100) of the per-round values `pick(curve)` of each seed's curve (None
    skipped)."""
    by_round: dict[int, list[float]] = {}
    for s in counted(seeds):
        curve = s.curve or Curve()
        for r, v in zip(curve.rounds, pick(curve)):
            if v is not None:
                by_round.setdefault(r, []).append(v)
    rounds = sorted(by_round)
    return rounds, [100.0 * sum(by_round[r]) / len(by_round[r]) for r in rounds]


def _mean_curve(seeds: list[SeedRun], key: str) -> tuple[list[int], list[float]]:
    return _mean_by_round(seeds, lambda curve: getattr(curve, key))


def plot_curves(results: ExperimentResults, path: Path) -> Path:
    """Write the two-panel curve figure for every arm with at least one round; returns `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (raw_ax, best_ax) = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (name, arm) in enumerate(results.arms.items()):
        color = colors[i % len(colors)]
        rounds, raw = _mean_curve(arm.seeds, "raw")
        if not rounds:
            continue
        for s in counted(arm.seeds):
            curve = s.curve or Curve()
            pts = [(r, 100.0 * v) for r, v in zip(curve.rounds, curve.raw) if v is not None]
            if pts:
                raw_ax.plot(*zip(*pts), color=color, alpha=0.25, linewidth=0.8)
        raw_ax.plot(rounds, raw, "o--", color=color, label=name)
        b_rounds, best = _mean_curve(arm.seeds, "best")
        best_ax.step(b_rounds, best, where="post", color=color, label=name)
        best_ax.plot(b_rounds, best, "o", color=color, markersize=3)
    raw_ax.set_title("controller Overall per round (raw; thin = seeds)")
    best_ax.set_title("retained best after each round (staircase)")
    from matplotlib.ticker import MaxNLocator

    for ax in (raw_ax, best_ax):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("round")
        ax.grid(alpha=0.3)
    raw_ax.set_ylabel("Overall (0-100)")
    if best_ax.get_legend_handles_labels()[0]:
        best_ax.legend(fontsize=8, loc="best")
    fig.suptitle(f"{results.experiment}: mean over seeds {results.seeds}")
    return save_figure(fig, path)


def save_figure(fig: Any, path: Path) -> Path:
    """Write `fig` as a PNG at `path` atomically (tight layout, 110 dpi) and close it; returns `path`."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return atomic_write_bytes(path, buf.getvalue())


def stage_curve(seeds: list[SeedRun], stage: str) -> tuple[list[int], list[float]]:
    """(rounds, mean controller score 0-100 of `stage` over the seeds that have it) from collected seed results."""
    return _mean_by_round(seeds, lambda curve: [scores.get(stage) for scores in curve.stages])


def plot_stage_staircase(results: ExperimentResults, path: Path) -> Path:
    """Write one panel per arm with each stage's controller score per round (mean over seeds); returns `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    arms = list(results.arms.items())
    cols = min(4, max(1, len(arms)))
    rows = (len(arms) + cols - 1) // cols or 1
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.0 * rows), sharey=True, squeeze=False)
    for ax, (name, arm) in zip(axes.flat, arms):
        for stage in results.stage_keys:
            rounds, values = stage_curve(arm.seeds, stage)
            if rounds:
                ax.plot(rounds, values, "o-", markersize=3, label=stage)
        ax.set_title(name, fontsize=9)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("round")
        ax.set_ylim(-2, 102)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(arms) :]:
        ax.axis("off")
    axes[0][0].set_ylabel("controller stage score (0-100)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="upper right", fontsize=8)
    fig.suptitle(f"{results.experiment}: per-stage scores by round (mean over seeds {results.seeds})")
    return save_figure(fig, path)
