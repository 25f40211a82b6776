"""The arm-versus-twin study's figure (`curves.png`): the training reward per GRPO step and the held-out stage probe
against step, for the arm and its twin, each seed its own line.

Reads merged `TwinUnit`s (numbers only); writes the PNG atomically. Left: each step's mean true reward (thin) and
its running mean over the pre-registered window (thick); the windows C1 compares are shaded. Right: the probe's
mean state reward x 100 at each probed step with its 95 % interval over probe states (error bars), step 0 being
the SFT (the reference unit) shared by every line; its axis starts at 0, so a change of one state is drawn at its size.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bat.evaluate.aggregate import half_width
from bat.experiment.plots import save_figure
from bat.experiment.twin_analysis import WINDOW
from bat.experiment.twin_design import REFERENCE, TwinDesign
from bat.schemas.twin_study import TwinUnit

STYLES = ("-", "--", ":", "-.")
"""Line style per seed (in the study's seed order)."""
PROBE_DODGE = 0.4
"""Steps between neighbouring lines' probe points, so that their intervals do not cover each other."""


def running_mean(rewards: list[float | None], window: int) -> list[float]:
    """The mean of each step's last `window` rewards (fewer at the start; None steps left out, NaN when all are)."""
    values = np.asarray([np.nan if r is None else r for r in rewards], dtype=float)
    out = []
    for i in range(len(values)):
        chunk = values[max(0, i - window + 1) : i + 1]
        out.append(float(np.nanmean(chunk)) if np.isfinite(chunk).any() else float("nan"))
    return out


def probe_point(values: list[float | None]) -> tuple[float, float] | None:
    """(mean, 95 % half-width) x 100 over the probe states with a score (half-width 0 for one state); None without
    one."""
    kept = [v for v in values if v is not None]
    if not kept:
        return None
    hw = half_width(kept, 0.95)
    return 100.0 * float(np.mean(kept)), 100.0 * (hw or 0.0)


def plot_twin(units: list[TwinUnit], design: TwinDesign, path: Path) -> Path:
    """Write the two-panel figure for the units present (an empty panel says so); returns `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (reward_ax, probe_ax) = plt.subplots(1, 2, figsize=(11, 4.2))
    colors = dict(zip(design.arms, ("tab:blue", "tab:orange")))
    by = {(u.arm, u.seed): u for u in units}
    reference = [by[(REFERENCE, s)] for s in design.reference_seeds if (REFERENCE, s) in by]
    sft_points = [p for p in (probe_point(u.probe[0]) for u in reference if 0 in u.probe) if p is not None]
    sft_probe = tuple(float(np.mean(column)) for column in zip(*sft_points)) if sft_points else None
    lines = len(design.arms) * len(design.seeds)
    for a, arm in enumerate(design.arms):
        for i, (style, seed) in enumerate(zip(STYLES * 4, design.seeds)):
            dodge = (a * len(design.seeds) + i - (lines - 1) / 2) * PROBE_DODGE
            unit = by.get((arm, seed))
            if unit is None:
                continue
            label = f"{arm} seed {seed}"
            if unit.rewards:
                steps = list(range(1, len(unit.rewards) + 1))
                shown = [np.nan if r is None else r for r in unit.rewards]
                reward_ax.plot(steps, shown, style, color=colors[arm], alpha=0.3, linewidth=0.8)
                reward_ax.plot(steps, running_mean(unit.rewards, WINDOW), style, color=colors[arm], label=label)
            points = sorted((s, probe_point(v)) for s, v in unit.probe.items())
            points = [(s, p) for s, p in points if p is not None]
            if sft_points and 0 not in unit.probe:
                points = [(0, sft_probe), *points]
            if points:
                steps, cells = zip(*points)
                probe_ax.errorbar(
                    [step + dodge for step in steps],
                    [m for m, _ in cells],
                    yerr=[h for _, h in cells],
                    linestyle=style,
                    marker="o",
                    capsize=3,
                    color=colors[arm],
                    label=label,
                )
    if sft_points:
        probe_ax.errorbar(
            [0], [sft_probe[0]], yerr=[sft_probe[1]], fmt="s", capsize=3, color="black", label=f"{REFERENCE} (step 0)"
        )
    for lo, hi in ((1, WINDOW), (design.steps - WINDOW + 1, design.steps)):
        reward_ax.axvspan(lo - 0.5, hi + 0.5, color="grey", alpha=0.1)
    reward_ax.set_title(f"training reward per GRPO step (thick: running mean over {WINDOW})")
    reward_ax.set_xlabel("GRPO step")
    reward_ax.set_ylabel("mean true reward of the step's rollouts")
    reward_ax.set_xlim(0.5, design.steps + 0.5)
    probe_ax.set_title("held-out stage probe")
    probe_ax.set_xlabel("GRPO step")
    probe_ax.set_ylabel("mean state reward x 100")
    probe_ax.set_xticks([0, *design.probe_steps])
    probe_ax.set_ylim(bottom=0)
    for ax in (reward_ax, probe_ax):
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="best")
        else:
            ax.text(0.5, 0.5, "no unit recorded yet", ha="center", va="center", transform=ax.transAxes)
    fig.suptitle(f"{design.arm} vs its shuffled-reward twin {design.twin}, seeds {list(design.seeds)}")
    return save_figure(fig, path)
