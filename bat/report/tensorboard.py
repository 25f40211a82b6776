"""TensorBoard event files of a run, written from its training metrics and held-out aggregates.

Reads `round_00/sft/metrics.jsonl`, every `round_NN/grpo/metrics.jsonl` and every round's controller aggregate
(`round_NN/evaluate/aggregate_controller.json`); writes one event file per source under `state/<run>/tensorboard/`
(`sft/`, `grpo/`, `eval/`), rebuilt whole each time so a resumed or extended run never duplicates points. The x axis
is the SFT step, the GRPO step counted across rounds, and the round for evaluation. Only aggregate numbers are
written. Open with `tensorboard --logdir state/<run>/tensorboard` (offline).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bat.evaluate.store import load_aggregate
from bat.report.rl_steps import metric_rows
from bat.state.atomic import plain_temp_dir
from bat.state.layout import RunLayout

SFT_SCALARS = ("loss", "val_loss", "grad_norm", "lr", "tokens_per_s")
GRPO_SCALARS = (
    "loss",
    "kl",
    "clip_frac",
    "grad_norm",
    "lr",
    "tokens_per_s",
    "reward_mean",
    "reward_mean_trained",
    "adv_abs_mean",
    "groups",
    "groups_identical",
    "groups_identical_drawn",
    "groups_replaced",
    "rollout_seconds",
    "train_seconds",
)
"""Per-step GRPO scalars (the online block's signal counts, the twin's trained reward and its seconds included;
a key a step does not record is skipped)."""


def _write(writer: Any, prefix: str, step: int, row: dict[str, Any], keys: Iterable[str]) -> None:
    for key in keys:
        value = row.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            writer.add_scalar(f"{prefix}/{key}", float(value), step)


def write_tensorboard(layout: RunLayout, stage_keys: Iterable[str]) -> Path | None:
    """Rebuild `layout.tensorboard_dir`; returns it, or None when the `tensorboard` package is not installed."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        return None
    keys = list(stage_keys)
    target = layout.tensorboard_dir
    tmp = plain_temp_dir(layout.root, prefix=".tensorboard-")
    try:
        with SummaryWriter(str(tmp / "sft")) as w:
            for row in metric_rows(layout.training_metrics(0, "sft")):
                _write(w, "sft", row["step"], row, SFT_SCALARS)
        with SummaryWriter(str(tmp / "grpo")) as w:
            offset = 0
            for r in layout.rounds():
                rows = metric_rows(layout.training_metrics(r, "grpo"))
                for row in rows:
                    step = offset + row["step"]
                    _write(w, "grpo", step, row, GRPO_SCALARS)
                    for pool, value in (row.get("reward_mean_by_pool") or {}).items():
                        _write(w, "grpo/reward_by_pool", step, {pool: value}, [pool])
                    w.add_scalar("grpo/round", r, step)
                offset += max((row["step"] for row in rows), default=0)
        with SummaryWriter(str(tmp / "eval")) as w:
            for r in layout.rounds():
                agg = load_aggregate(layout, r, "controller")
                if agg is None:
                    continue
                _write(
                    w,
                    "controller",
                    r,
                    {"overall": agg.overall, "task": agg.task, "agentic": agg.agentic},
                    ("overall", "task", "agentic"),
                )
                _write(w, "controller/stage", r, agg.stages, keys)
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target
