"""matplotlib PNGs beside the report: `overall.png` (left, the held-out Overall per policy with the best-so-far
staircase, paper Fig. 1c; right, the RL training reward per GRPO step) and per-stage bars per round. Uses `matplotlib.figure.Figure` directly (no pyplot, no global backend)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from bat.report.rl_steps import StepPoint
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


def _scatter(ax, points: Sequence[tuple[float, float]], **style) -> None:
    """Markers at `points` ((x, y) pairs) on `ax`."""
    ax.scatter([x for x, _ in points], [y for _, y in points], **style)


def _policy_panel(ax, views: Sequence[RoundView]) -> None:
    """Left panel: dashed raw controller Overall per policy (with half-widths cut at 0 and 100), the untrained base
    policy left of round 0 when it was evaluated, solid best-so-far staircase, stars on rounds whose candidate became
    the retained best; each point labelled with its score."""
    scored = [v for v in views if v.controller is not None and v.controller.overall is not None]
    base = next((v.base for v in views if v.base is not None and v.base.overall is not None), None)
    if not scored:
        ax.text(0.5, 0.5, "no controller evaluation yet", ha="center", va="center", transform=ax.transAxes)
        return
    xs = [v.round for v in scored]
    ys, errs = zip(*(_overall(v.controller) for v in scored))
    ax.errorbar(
        xs, ys, yerr=clipped_errors(ys, errs), linestyle="--", marker="o", capsize=3, label="controller Overall"
    )
    points = list(zip(xs, ys))
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
        points.insert(0, (-1, y))
    for x, y in points:
        ax.annotate(f"{y:.1f}", (x, y), textcoords="offset points", xytext=(6, 4), fontsize=8)
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
        _scatter(ax, stars, marker="*", s=220, zorder=5, color="gold", edgecolors="black", label="retained (new best)")
    ticks = ([-1] if base is not None else []) + xs
    ax.set_xticks(ticks)
    ax.set_xticklabels(["base" if x == -1 else "SFT" if x == 0 else f"RL {x}" for x in ticks])
    ax.set_xlim(min(ticks) - 0.5, max(ticks) + 0.7)
    ax.set_ylim(0, 100)
    ax.legend(loc="upper left", fontsize=8)


def _no_signal(point: StepPoint) -> bool:
    """Whether every GRPO group of the step had equal rewards (zero advantages: the step trained nothing)."""
    groups, flat = point.row.get("groups"), point.row.get("groups_identical")
    return isinstance(groups, int) and isinstance(flat, int) and groups > 0 and flat >= groups


def _reward_panel(ax, curve: Sequence[StepPoint]) -> None:
    """Right panel: mean true reward per GRPO step (steps counted across rounds), one line per pool and, with more
    than one pool, the mean over all rollouts; red crosses on steps without signal; dotted lines where a round
    starts."""
    if not curve:
        ax.text(0.5, 0.5, "no RL step yet", ha="center", va="center", transform=ax.transAxes)
        ax.set_xlabel("GRPO step")
        return
    pools = sorted({pool for p in curve for pool in p.by_pool})
    for pool in pools:
        pts = [(p.x, p.by_pool[pool]) for p in curve if pool in p.by_pool]
        ax.plot([x for x, _ in pts], [y for _, y in pts], marker=".", linewidth=1.2, label=f"{pool} rollouts")
    if len(pools) != 1:
        pts = [(p.x, p.reward) for p in curve if p.reward is not None]
        ax.plot(
            [x for x, _ in pts], [y for _, y in pts], color="black", marker="o", linewidth=2.0, label="all rollouts"
        )
    flat = [(p.x, p.reward) for p in curve if p.reward is not None and _no_signal(p)]
    if flat:
        _scatter(ax, flat, marker="x", s=60, color="red", zorder=4, label="no signal (every group's rewards equal)")
    for r in sorted({p.round for p in curve}):
        first = min(p.x for p in curve if p.round == r)
        ax.axvline(first - 0.5, color="grey", linestyle=":", linewidth=1.0)
        ax.text(first - 0.4, 1.02, f"round {r}", fontsize=7, color="grey", va="bottom")
    top = max([1.0] + [v for p in curve for v in [p.reward or 0.0, *p.by_pool.values()]])
    ax.set_ylim(0, top * 1.08)
    ax.set_xlabel("GRPO step (fresh rollouts each step)")
    ax.legend(loc="best", fontsize=8)


def plot_overall(views: Sequence[RoundView], path: Path, title: str = "", curve: Sequence[StepPoint] = ()) -> Path:
    """Two panels: left, the held-out controller Overall per policy (base, SFT, after each RL round;
    `_policy_panel`); right, the training reward per GRPO step of the RL rounds (`curve`, `_reward_panel`)."""
    fig = Figure(figsize=(11.0, 3.9))
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    _policy_panel(left, views)
    left.set_xlabel("policy")
    left.set_ylabel("Overall (0-100)")
    left.set_title(title or "Held-out controller Overall per policy")
    left.grid(alpha=0.3)
    _reward_panel(right, curve)
    right.set_ylabel("mean reward per step (0-1)")
    right.set_title("RL training reward per GRPO step")
    right.grid(alpha=0.3)
    fig.tight_layout()
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
