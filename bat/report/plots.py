"""matplotlib PNGs beside the report: raw per-round Overall with the best-so-far staircase (paper Fig. 1c)
and per-stage bars per round. Uses `matplotlib.figure.Figure` directly (no pyplot, no global backend)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from bat.report.summary import RoundView
from bat.state.atomic import atomic_write_bytes


def _save(fig: Figure, path: Path) -> Path:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    return atomic_write_bytes(path, buffer.getvalue())


def clipped_errors(values: Sequence[float], half_widths: Sequence[float]) -> list[list[float]]:
    """Asymmetric error bars `[below, above]` for `values` +- `half_widths`, cut at the score range 0-100."""
    return [
        [min(h, max(0.0, v)) for v, h in zip(values, half_widths)],
        [min(h, max(0.0, 100.0 - v)) for v, h in zip(values, half_widths)],
    ]


def _overall(agg) -> tuple[float, float]:
    return 100 * agg.overall, 100 * (agg.half_widths.get("overall") or 0.0)


def plot_overall(views: Sequence[RoundView], path: Path, title: str = "") -> Path:
    """Dashed raw controller Overall per round (with half-widths cut at 0 and 100), the untrained base policy
    left of round 0 when it was evaluated, solid best-so-far staircase, stars on rounds whose candidate became
    the retained best."""
    scored = [v for v in views if v.controller is not None and v.controller.overall is not None]
    base = next((v.base for v in views if v.base is not None and v.base.overall is not None), None)
    fig = Figure(figsize=(6.4, 3.8))
    ax = fig.add_subplot(1, 1, 1)
    if scored:
        xs = [v.round for v in scored]
        ys, errs = zip(*(_overall(v.controller) for v in scored))
        ax.errorbar(
            xs, ys, yerr=clipped_errors(ys, errs), linestyle="--", marker="o", capsize=3, label="controller Overall"
        )
        if base is not None:
            y, err = _overall(base)
            ax.errorbar(
                [-1],
                [y],
                yerr=clipped_errors([y], [err]),
                marker="s",
                capsize=3,
                color="grey",
                linestyle="none",
                label="base policy (before SFT)",
            )
        staircase = [(v.round, 100 * v.best.score) for v in scored if v.best is not None]
        if staircase:
            ax.step(
                [x for x, _ in staircase],
                [y for _, y in staircase],
                where="post",
                linewidth=2.2,
                label="best so far (retained)",
            )
        stars = [
            (v.round, 100 * v.controller.overall)
            for v in scored  # type: ignore[union-attr]
            if v.best is not None and v.best.round == v.round
        ]
        if stars:
            ax.scatter(
                [x for x, _ in stars],
                [y for _, y in stars],
                marker="*",
                s=220,
                zorder=5,
                color="gold",
                edgecolors="black",
                label="retained (new best)",
            )
        ticks = ([-1] if base is not None else []) + xs
        ax.set_xticks(ticks)
        ax.set_xticklabels(["base" if x == -1 else "0 (SFT)" if x == 0 else str(x) for x in ticks])
        ax.set_ylim(0, 100)
        ax.legend(loc="upper left", fontsize=8)
    else:
        ax.text(0.5, 0.5, "no controller evaluation yet", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("round")
    ax.set_ylabel("Overall (0-100)")
    ax.set_title(title or "Held-out controller Overall per round")
    ax.grid(alpha=0.3)
    return _save(fig, path)


def plot_stages(views: Sequence[RoundView], stage_keys: Sequence[str], path: Path) -> Path:
    """Grouped bars: one group per stage, one bar per round (0-100); the routed target is outlined."""
    scored = [v for v in views if v.controller is not None]
    fig = Figure(figsize=(7.2, 3.8))
    ax = fig.add_subplot(1, 1, 1)
    width = 0.8 / max(1, len(scored))
    handles = []
    for i, view in enumerate(scored):
        stages = view.controller.stages  # type: ignore[union-attr]
        values = [100 * (stages.get(k) or 0.0) for k in stage_keys]
        xs = [j + i * width for j in range(len(stage_keys))]
        bars = ax.bar(xs, values, width=width)
        handles.append(Patch(facecolor=bars.patches[0].get_facecolor(), label=f"round {view.round}"))
        target = view.decision.target_stage if view.decision else None
        if target in stage_keys:
            bars[list(stage_keys).index(target)].set_edgecolor("black")
            bars[list(stage_keys).index(target)].set_linewidth(2.0)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(stage_keys))])
    ax.set_xticklabels(list(stage_keys))
    ax.set_ylabel("stage score (0-100)")
    ax.set_ylim(0, 100)
    ax.set_title("Stage scores per round (outlined: next target stage)")
    if handles:
        ax.legend(handles=handles, loc="best", fontsize=7, ncol=2)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)
