"""The RL training curve of a run: one point per GRPO optimizer step, counted across rounds.

Reads every `round_NN/grpo/metrics.jsonl` (`bat.train.grpo` and the online block `bat.online.block` write one line
per step); the report draws the points (`bat.report.plots.plot_overall`, right panel) and lists the round's steps in
`report.md` ("RL steps"). Rewards are on 0-1 (the verifier's scale); a step with nothing trainable has no reward.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bat.state.jsonl import read_jsonl_resuming
from bat.state.layout import RunLayout


def metric_rows(path: Path) -> list[dict[str, Any]]:
    """The metric lines of one training phase (a torn final line is dropped); [] when absent."""
    if not path.is_file():
        return []
    rows, _ = read_jsonl_resuming(path)
    return [r for r in rows if isinstance(r, dict) and isinstance(r.get("step"), int)]


def _num(row: dict[str, Any], key: str) -> float | None:
    value = row.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class StepPoint:
    """One GRPO step of one round as the report shows it."""

    round: int
    step: int
    """The step within its round (1-based, as in `metrics.jsonl`)."""
    x: int
    """The step counted across rounds (round 1's steps first)."""
    reward: float | None
    """Mean true reward of the step's rollouts (`reward_mean`)."""
    by_pool: dict[str, float] = field(default_factory=dict)
    """Mean true reward per pool (`reward_mean_by_pool`)."""
    row: dict[str, Any] = field(default_factory=dict)
    """The whole metrics line (KL, clip fraction, gradient norm, identical groups, seconds, ...)."""


def grpo_curve(layout: RunLayout, upto_round: int | None = None) -> list[StepPoint]:
    """Every GRPO step of the rounds on disk (up to `upto_round` when given), in order."""
    points: list[StepPoint] = []
    offset = 0
    for r in layout.rounds():
        if upto_round is not None and r > upto_round:
            break
        rows = metric_rows(layout.training_metrics(r, "grpo"))
        for row in rows:
            pools = row.get("reward_mean_by_pool") or {}
            points.append(
                StepPoint(
                    round=r,
                    step=row["step"],
                    x=offset + row["step"],
                    reward=_num(row, "reward_mean"),
                    by_pool={p: float(v) for p, v in sorted(pools.items()) if _num(pools, p) is not None},
                    row=row,
                )
            )
        offset += max((row["step"] for row in rows), default=0)
    return points


def _cell(row: dict[str, Any], key: str, fmt: str) -> str:
    value = _num(row, key)
    return "-" if value is None else format(value, fmt)


STEP_COLUMNS = (
    ("reward", "reward_mean", ".3f"),
    ("identical groups", "groups_identical", "g"),
    ("KL", "kl", ".4f"),
    ("grad norm", "grad_norm", ".3f"),
    ("clip frac", "clip_frac", ".3f"),
    ("rollout s", "rollout_seconds", ".0f"),
    ("train s", "train_seconds", ".0f"),
)


def step_lines(rows: list[dict[str, Any]]) -> list[str]:
    """`report.md`'s "RL steps" section from one round's `metrics.jsonl` lines: one table row per GRPO step
    (none: no lines)."""
    if not rows:
        return []
    pools = sorted({pool for row in rows for pool in row.get("reward_mean_by_pool") or {}})
    rewards = [r for row in rows if (r := _num(row, "reward_mean")) is not None]
    lines = ["## RL steps", ""]
    if rewards:
        lines += [
            f"{len(rows)} GRPO steps; mean reward {rewards[0]:.3f} at the first step, {rewards[-1]:.3f} at the last, "
            f"{sum(rewards) / len(rewards):.3f} over all (true rewards, 0-1; the training curve is the right panel "
            "of `overall.png`).",
            "",
        ]
    head = ["step", STEP_COLUMNS[0][0], *pools, *(name for name, _, _ in STEP_COLUMNS[1:])]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        by_pool = row.get("reward_mean_by_pool") or {}
        cells = [str(row["step"]), _cell(row, "reward_mean", ".3f")]
        cells += [_cell(by_pool, pool, ".3f") for pool in pools]
        cells += [_cell(row, key, fmt) for _, key, fmt in STEP_COLUMNS[1:]]
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]
