"""Cells and table heads shared by the experiment report's markdown tables (`write`, `stage_report`).

Pure formatting of the collected results (`bat.experiment.collect.collect`); reads and writes no files.
"""

from __future__ import annotations

from collections.abc import Sequence

from bat.evaluate.aggregate import pct
from bat.schemas.experiment_results import ArmSummary, Comparison, ExperimentResults, PowerComparison


def table_head(columns: Sequence[str]) -> list[str]:
    """The header row and the separator row of a markdown table with these column titles."""
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]


def pm(summary: ArmSummary, metric: str) -> str:
    """`mean ± half-width` (0-100) of one metric of an arm summary; `n/a` when the mean is missing."""
    mean = summary.mean.get(metric)
    if mean is None:
        return "n/a"
    hw = summary.half_width.get(metric)
    return pct(mean) + (f" ± {100.0 * hw:.1f}" if hw is not None else "")


def num(value: float | None) -> str:
    """A 0-100 score with one decimal, `-` when absent."""
    return "-" if value is None else f"{value:.1f}"


def delta(cmp: Comparison | PowerComparison) -> str:
    """`+x.y points ± h.w` of a paired comparison (`bat.experiment.summary.compare`, or an anchored wide row)."""
    hw = cmp.half_width
    mean = round(100.0 * (cmp.mean_delta or 0.0), 1) + 0.0  # + 0.0: a change that rounds to zero prints +0.0, not -0.0
    return f"{mean:+.1f} points" + (f" ± {100.0 * hw:.1f}" if hw is not None else "")


def split_view(results: ExperimentResults, split: str) -> tuple[dict[str, ArmSummary], dict[str, Comparison | None]]:
    """(arm -> summary, arm -> comparison vs the reference) on one end-of-run split; the report split's come from
    `summary`/`comparisons`, another split's from `summaries`/`comparisons_by_split`."""
    if split == results.report_split:
        return {n: a.summary for n, a in results.arms.items()}, results.comparisons
    summaries = {n: a.summaries.get(split) for n, a in results.arms.items()}
    return {n: s for n, s in summaries.items() if s}, results.comparisons_by_split.get(split) or {}
