"""Write `<out>/results.json`, `<out>/README.md` (readable table, command, commit, closing note) and `<out>/curves.png`.

Reads the collected results (`bat.experiment.collect.collect`). Writes the three files atomically.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import subprocess
from pathlib import Path

from bat.evaluate.aggregate import pct
from bat.experiment.markdown import delta, pm, split_view, table_head
from bat.experiment.plots import plot_curves, plot_stage_staircase
from bat.experiment.records import write_record
from bat.experiment.runs_report import pool_signal_table, runs_table, superseded_table
from bat.experiment.spec import ExperimentSpec
from bat.experiment.stage_report import (
    held_out_profile_table,
    other_split_tables,
    stage_means_table,
    stage_tables,
    stall_table,
)
from bat.experiment.wide_report import wide_section
from bat.schemas.experiment_results import ArmSummary, Comparison, ExperimentResults, PowerComparison
from bat.state.atomic import atomic_write_text
from bat.state.experiment_layout import ResultsLayout


def git_commit() -> str:
    """`<full sha>` of HEAD, with `+dirty` when the working tree has uncommitted changes; `unknown` without git."""
    root = Path(__file__).resolve().parents[2]
    try:
        sha = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=False
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (sha or "unknown") + ("+dirty" if sha and dirty else "")


def _spread(summary: ArmSummary) -> str:
    """`SD [min, max]` of the seed means of Overall (0-100); `n/a` without finished seeds."""
    sd, lo, hi = (getattr(summary, k).get("overall") for k in ("seed_sd", "seed_min", "seed_max"))
    if lo is None or hi is None:
        return "n/a"
    return (f"{100.0 * sd:.1f}" if sd is not None else "-") + f" [{pct(lo)}, {pct(hi)}]"


def _total_wall(results: ExperimentResults) -> float:
    """Wall seconds of every arm x seed plus each distinct shared bootstrap."""
    arms = sum(s.wall_s or 0.0 for a in results.arms.values() for s in a.seeds)
    distinct = {r.sft_digest: r.wall_s for r in results.shared.values()}
    return arms + sum(distinct.values())


def _ordering(results: ExperimentResults, split: str | None = None) -> str:
    """The observed ordering of arms by mean Overall on `split` (default the report split), and the reference arm's
    margins with uncertainty."""
    split = split or results.report_split
    summaries, comparisons = split_view(results, split)
    ranked = sorted(
        ((s.mean["overall"], n) for n, s in summaries.items() if s.mean.get("overall") is not None),
        reverse=True,
    )
    if not ranked:
        return (
            f"No arm finished with a complete end-of-run evaluation on the {split} split, so no ordering can be stated."
        )
    text = f"{ranked[0][1]} ({pct(ranked[0][0])})"
    for (prev, _), (value, name) in itertools.pairwise(ranked):
        text += (" = " if pct(prev) == pct(value) else " > ") + f"{name} ({pct(value)})"
    lines = [f"Observed ordering by mean Overall on the {split} split: {text}."]
    ref = results.reference_arm
    for name, cmp in comparisons.items():
        if cmp is None:
            lines.append(f"* {ref} vs {name}: not comparable (missing or null results).")
            continue
        p = "n/a" if cmp.p_value is None else f"{cmp.p_value:.3f}"
        caveat = ""
        if _suites_of(results, name) != _suites_of(results, ref):
            caveat = (
                " Evaluated on other held-out suites than the reference's, so the difference includes the suites' "
                "own difficulty (the wide section anchors it on the SFT where it can)."
            )
            anchored = _anchored_row(results, name) if split == "final" else None
            if anchored is not None:
                runs = " vs ".join(str(n) for n in anchored.n_runs)  # type: ignore[union-attr]
                caveat += (
                    f" Anchored on the SFT over the wide final runs ({runs}): {delta(anchored)}, "
                    f"p = {anchored.p_value:.3f}."
                )
        lines.append(
            f"* {ref} − {name}: {delta(cmp)} (paired over {cmp.n_tracks} tracks, p = {p}): {ref} is {_verdict(cmp)}."
            + caveat
        )
    return "\n".join(lines)


def _anchored_row(results: ExperimentResults, arm: str) -> PowerComparison | None:
    """The reference - `arm` comparison of the widest wide final evaluation when it is anchored on the SFT (the
    arms' gains over it on their own suites; `bat.experiment.wide_summary`; `n_runs`: reference's, arm's); None
    otherwise."""
    widest = results.widest_wide()
    row = widest.vs_reference.get(arm) if widest is not None else None
    if row is None or row.design != "anchored" or row.p_value is None:
        return None
    return row


def _suites_of(results: ExperimentResults, arm: str) -> set[str | None]:
    """The held-out suites (secret fingerprints; None where a record predates them) of an arm's finished seeds."""
    seeds = results.arms[arm].seeds if arm in results.arms else []
    return {x.heldout_suite for x in seeds if x.done}


def _verdict(cmp: Comparison) -> str:
    """`ahead`/`behind` when the paired mean change lies outside its half-width, else `within uncertainty`."""
    hw = cmp.half_width
    if hw is None or abs(cmp.mean_delta) <= hw:
        return "within uncertainty"
    return "ahead" if cmp.mean_delta > 0 else "behind"


def _closing_note(results: ExperimentResults) -> str:
    """The ordering and margins on the report split, then on every other end-of-run split that has results."""
    splits = [results.report_split]
    for a in results.arms.values():
        splits += [s for s in a.summaries if s not in splits]
    return "\n\n".join(_ordering(results, split) for split in splits)


def render_readme(results: ExperimentResults) -> str:
    """The readable report: command, commit, table, per-stage table, budget, per-seed runs, curves, staircase, stage
    profiles, where end-of-run runs stall, the wide final evaluation, closing note."""
    out = _headline_table(results) + stage_means_table(results) + other_split_tables(results)
    out += _budget_section(results)
    out += runs_table(results) + pool_signal_table(results) + superseded_table(results)
    out += [
        "",
        "## Curves",
        "",
        "![curves](curves.png)",
        "",
        "Controller split (the routing evaluation): raw Overall per round, and the retained best's score.",
        "",
    ]
    out += stage_tables(results) + held_out_profile_table(results) + stall_table(results) + wide_section(results)
    out += ["", "## Closing note", "", _closing_note(results), ""]
    return "\n".join(out)


def _headline_table(results: ExperimentResults) -> list[str]:
    """Title, provenance paragraph and one row per arm: Overall/Agentic/Task, seed spread, counts, mean wall."""
    conf = round(100 * results.confidence)
    out = [
        f"# Experiment `{results.experiment}`",
        "",
        f"Produced by `{results.command}` at commit `{results.commit}` on {results.created_at}; "
        f"total wall {_total_wall(results) / 60:.1f} min (every arm x seed plus the shared bootstraps).",
        "",
        f"Base config `{results.base_config}` with overrides `{results.overrides}`; seeds {results.seeds}. "
        f"End-of-run numbers: the retained best checkpoint (untrained model for `base`) on the "
        f"**{results.report_split}** split, which never feeds routing or tuning. Mean of seed-averaged track "
        f"means ± {conf}% t half-width across tracks; seed spread = SD of seed means [min, max]. Scores 0-100.",
        "",
        *table_head(
            [
                "arm",
                "Overall",
                "Agentic",
                "Task",
                "seed SD [min, max]",
                "seeds ok",
                "rollouts",
                "GRPO steps",
                "wall s (mean)",
            ]
        ),
    ]
    for name, arm in results.arms.items():
        s = arm.summary
        done = arm.done_seeds()
        rollouts = sorted({x.rollouts for x in done})
        steps = sorted({x.grpo_steps for x in done})
        wall = arm.wall_s_mean
        out.append(
            f"| {name} | {pm(s, 'overall')} | {pm(s, 'agentic')} | {pm(s, 'task')} | {_spread(s)} | "
            f"{len(done)}/{len(arm.seeds)} | {'/'.join(map(str, rollouts)) or '-'} | "
            f"{'/'.join(map(str, steps)) or '-'} | {'-' if wall is None else f'{wall:.0f}'} |"
        )
    return out


def _budget_section(results: ExperimentResults) -> list[str]:
    """The matched-budget verdict, what wall seconds count, and one line per shared bootstrap (SFT digest, wall)."""
    budget = results.budget
    assert budget is not None, "collected results always carry their budget audit"
    per_seed = {seed: b.to_json() for seed, b in budget.per_seed.items()}
    out = [
        "",
        "## Budget",
        "",
        f"Matched budget: **{'yes' if budget.matched else 'NO'}** (trained arms share {sorted(budget.signature)}; "
        f"differing fields: {budget.differing_fields or 'none'}; RL arms {budget.rl_arms} rollouts/GRPO steps "
        f"per seed: {per_seed}; {budget.note}).",
        "",
        "Wall seconds per arm count the arm's own rounds and end-of-run evaluation; the shared bootstrap "
        "(bank + SFT) is listed below.",
        "",
        (
            "Shared bootstrap per seed (one bank + SFT checkpoint reused by every trained arm):"
            if results.bootstrap_seed is None
            else f"One shared bootstrap (bank + SFT checkpoint built with run seed {results.bootstrap_seed}) serves every "
            "seed, and evaluation sampling seeds come from the experiment's held-out secret (the same for every arm and seed), "
            "so the seed spread covers RL sampling and routing only (an untrained arm's seeds reproduce each other):"
        ),
        "",
    ]
    if results.bootstrap_seed is None:
        for seed, rec in results.shared.items():
            out.append(f"* seed {seed}: SFT digest `{rec.sft_digest[:16]}`, bootstrap wall {rec.wall_s:.0f} s")
    else:  # one bootstrap read once per seed: list each distinct build once
        builds = dict.fromkeys((rec.sft_digest, rec.wall_s) for rec in results.shared.values())
        for digest, wall in builds:
            out.append(f"* run seed {results.bootstrap_seed}: SFT digest `{digest[:16]}`, bootstrap wall {wall:.0f} s")
    if budget.stale:
        out += [
            "",
            "**Stale runs, left out of every mean**: they ran under other budget fields than this experiment file "
            "resolves to now (field: [ran under, now]): "
            + "; ".join(f"{run} {fields}" for run, fields in budget.stale.items())
            + ". Set them aside with `--supersede TAG --reason TEXT` to rerun them.",
        ]
    if budget.unverified:
        out += [
            "",
            f"Runs recorded before records carried their budget fields (not checked): {', '.join(budget.unverified)}.",
        ]
    if not budget.one_bootstrap:
        out += ["", f"**Trained arms did not all start from one SFT checkpoint**: {budget.sft_digests}."]
    out += [f"* WARNING: {w}" for w in results.bootstrap_warnings]
    return out


def stamp(results: ExperimentResults, command: str) -> ExperimentResults:
    """`results` plus the exact command, the commit and the UTC time."""
    return results.model_copy(
        update={
            "command": command,
            "commit": git_commit(),
            "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        }
    )


def write_results(spec: ExperimentSpec, results: ExperimentResults, out_dir: Path | None = None) -> list[Path]:
    """Write stamped `results` as results.json, README.md, curves.png and stages.png under `out_dir` (default
    spec.out_dir)."""
    files = ResultsLayout(Path(out_dir or spec.out_dir))
    paths = [
        write_record(files.results, results),
        plot_curves(results, files.curves),
        plot_stage_staircase(results, files.stages),
    ]
    paths.append(atomic_write_text(files.report, render_readme(results)))
    return paths
