"""The experiment report's per-stage tables: end-of-run stage means, the other held-out split, the controller
staircase per round, the stage profile before and after RL on the controller and the end-of-run splits, and where
the end-of-run runs stall.

Reads the collected results (`bat.experiment.collect.collect`); returns markdown lines; writes no files.
"""

from __future__ import annotations

from collections import Counter

from bat.evaluate.aggregate import pct
from bat.experiment.markdown import delta, num, pm, split_view, table_head
from bat.experiment.plots import stage_curve
from bat.experiment.summary import END_SPLITS
from bat.schemas.experiment_results import ExperimentResults


def stage_means_table(results: ExperimentResults) -> list[str]:
    """One row per arm: each stage's end-of-run score with its half-width (same aggregation as the headline)."""
    stages = results.stage_keys
    out = ["", "Per stage (same aggregation):", "", *table_head(["arm", *stages])]
    for name, arm in results.arms.items():
        out.append(f"| {name} | " + " | ".join(pm(arm.summary, k) for k in stages) + " |")
    return out


def other_split_tables(results: ExperimentResults) -> list[str]:
    """Per end-of-run split other than the report split: one row per arm with Overall/Agentic/Task and every stage
    (same aggregation as the headline)."""
    stages = results.stage_keys
    splits = [s for a in results.arms.values() for s in a.summaries if s != results.report_split]
    out: list[str] = []
    for split in dict.fromkeys(splits):
        summaries, _ = split_view(results, split)
        out += [
            "",
            f"The same checkpoints on the **{split}** split (also held out; never feeds routing or tuning):",
            "",
            *table_head(["arm", "Overall", "Agentic", "Task", *stages, "seeds"]),
        ]
        for name, s in summaries.items():
            cells = [pm(s, m) for m in ("overall", "agentic", "task", *stages)]
            out.append(f"| {name} | " + " | ".join(cells) + f" | {s.n_seeds} |")
    return out


def stage_tables(results: ExperimentResults) -> list[str]:
    """The per-stage staircase (controller score of each stage per round, mean over seeds) and each arm's held-out
    controller stage profile before RL (round 0, the SFT checkpoint) and after (its last round), with the change."""
    stages = results.stage_keys
    out = [
        "## Per-stage staircase",
        "",
        "![stages](stages.png)",
        "",
        "Controller split, mean over seeds, 0-100: each stage's score per round.",
        "",
        *table_head(["arm", "round", *stages]),
    ]
    profile = []
    for name, arm in results.arms.items():
        curves = {k: dict(zip(*stage_curve(arm.seeds, k))) for k in stages}
        rounds = sorted({r for c in curves.values() for r in c})
        for r in rounds:
            out.append(f"| {name} | {r} | " + " | ".join(num(curves[k].get(r)) for k in stages) + " |")
        if len(rounds) >= 2:
            first, last = rounds[0], rounds[-1]
            cells = []
            for k in stages:
                a, b = curves[k].get(first), curves[k].get(last)
                cells.append("-" if a is None or b is None else f"{a:.1f} -> {b:.1f} ({b - a:+.1f})")
            profile.append(f"| {name} | {first} -> {last} | " + " | ".join(cells) + " |")
    out += [
        "",
        "Stage profile on the controller split (the routing evaluation) before RL (round 0: the SFT checkpoint) "
        "and after (the arm's last round, retained or not), mean over seeds:",
        "",
    ]
    if profile:
        out += [*table_head(["arm", "rounds", *stages]), *profile]
    else:
        out.append("(no arm has evaluated rounds before and after RL yet)")
    return out


def held_out_profile_table(results: ExperimentResults) -> list[str]:
    """Per end-of-run split and RL arm: each stage before RL (the SFT arm) -> after (the arm's retained best), with
    the paired per-track change and its half-width (`collect.held_out_profile`)."""
    profile = results.held_out_profile
    if not profile or not profile.splits:
        return []
    stages = results.stage_keys
    out = [
        "",
        f"Held-out stage profile before RL (`{profile.before}`, the SFT checkpoint every RL arm starts from) and "
        "after (the arm's retained best) on the end-of-run splits, mean over seeds; in brackets the paired "
        "per-track change ± half-width:",
        "",
        *table_head(["split", "arm", *stages]),
    ]
    for split, rows in profile.splits.items():
        for name, by_stage in rows.items():
            cells = []
            for k in stages:
                cell = by_stage[k]
                if cell.before is None or cell.after is None:
                    cells.append("-")
                    continue
                change = "" if cell.change is None else f" ({delta(cell.change).replace(' points', '')})"
                cells.append(f"{pct(cell.before)} -> {pct(cell.after)}{change}")
            out.append(f"| {split} | {name} | " + " | ".join(cells) + " |")
    return out


def stall_table(results: ExperimentResults) -> list[str]:
    """Per end-of-run split and arm, summed over the arm's finished seeds: runs that finished the workflow, runs that
    stalled at each stage, and the commonest kinds of a run's first failed turn (the counts each end-of-run aggregate
    carries as `failures`; numbers only). Seeds whose record predates the counts are left out."""
    stages = results.stage_keys
    splits = [results.report_split, *(s for s in END_SPLITS if s != results.report_split)]
    rows = []
    for split in splits:
        for name, arm in results.arms.items():
            aggs = [s.aggregates.get(split) for s in arm.done_seeds()]
            counted = [agg.failures for agg in aggs if agg is not None and agg.failures is not None]
            if not counted:
                continue
            stalled: Counter[str] = Counter()
            first: Counter[str] = Counter()
            for failures in counted:
                stalled.update(failures.stalled)
                first.update(failures.first_failures)
            runs = sum(f.runs for f in counted)
            common = ", ".join(f"{kind} {n}" for kind, n in first.most_common(3)) or "-"
            cells = [
                str(len(counted)),
                str(runs),
                str(stalled.get("finished", 0)),
                *(str(stalled.get(k, 0)) for k in stages),
            ]
            rows.append(f"| {split} | {name} | " + " | ".join(cells) + f" | {common} |")
    if not rows:
        return []
    return [
        "",
        "## Where end-of-run runs stall",
        "",
        "The retained best on each end-of-run split, runs summed over the arm's finished seeds: runs that finished the "
        "workflow, runs that stalled at each stage, and the commonest kinds of a run's first failed turn "
        "(`bat evaluate explain` names the kinds).",
        "",
        *table_head(["split", "arm", "seeds", "runs", "finished", *(f"stalled {k}" for k in stages), "first failure"]),
        *rows,
    ]
