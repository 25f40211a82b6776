"""The report section of the wide final evaluation (`bat.experiment.wide`), from the `wide` entry of results.json."""

from __future__ import annotations

from bat.experiment.markdown import table_head
from bat.schemas.experiment_results import ExperimentResults, PowerComparison, WideArmSummary, WideSummary
from bat.state.experiment_layout import is_null_arm


def wide_section(results: ExperimentResults) -> list[str]:
    """Markdown lines of the report's "Wide final evaluation" section (none without committed wide records)."""
    summaries = results.wide
    if not summaries:
        return []
    ref = results.reference_arm
    out = _intro(results)
    for summary in summaries:
        n = max(a.n_runs for a in summary.arms.values())
        out += [
            "",
            f"**{summary.repeats} runs per track ({n} runs)**",
            "",
            *table_head(
                [
                    "arm",
                    "seeds",
                    "Overall",
                    f"{ref} - arm",
                    "p",
                    "runs differing",
                    "per-run SD",
                    "detectable gap",
                    "arm - SFT (own suite)",
                ]
            ),
        ]
        several_suites = any(set(data.suites or {"A": 0}) != {"A"} for data in summary.arms.values())
        for arm, data in summary.arms.items():
            cells = _reference_cells(summary.vs_reference.get(arm))
            suites = data.suites or {"A": data.seeds}
            seeds = "; ".join(
                ", ".join(str(s) for s in seeds) + (f" ({label})" if several_suites else "")
                for label, seeds in suites.items()
            )
            cells.append(_gain_cell(summary.vs_anchor.get(arm)))
            out.append(f"| {arm} | {seeds} | {100 * data.mean:.1f} | " + " | ".join(cells) + " |")
        out += _null_table(summary)
        out += _profile_table(summary.arms)
    return out


def _intro(results: ExperimentResults) -> list[str]:
    """The section's title and the paragraph saying how its rows are computed (and what the null control is, when
    one was scored)."""
    conf = round(100 * results.confidence)
    out = [
        "",
        "## Wide final evaluation",
        "",
        "The retained checkpoints re-scored on the final split with more runs per track (`bat experiment --wide-final "
        "N`); the first end-of-run runs are the same instances and sampling seeds and are reused. Each arm's score "
        "is averaged over its seeds run by run, then paired run by run with the reference (same instance, same "
        f"sampling seed): mean difference +- {conf}% t half-width over runs, runs that differ, per-run SD, and the "
        "smallest gap these runs detect at 80% power. Scores 0-100. An arm x seed run on another disk met another "
        "experiment secret, so other held-out instances (suite B, C, ...; A is the reference arm's): an arm whose "
        "seeds are not all on the reference's one suite is compared unpaired (Welch, over each suite's runs, seeds "
        "averaged within a suite; runs column: reference vs arm, SD column: the arm's per-run SD). A suite's own "
        "difficulty then enters the difference, so where the shared SFT checkpoint (rebuilt bit-identically on "
        "every disk) was scored on every suite of both arms, the row compares each arm's gain over the SFT run by "
        "run on its own suites (anchored on the SFT, an arm's suites pooled; SD column: the arm's per-run gain), the "
        "plain unpaired difference in brackets. "
        "Last column: each arm's gain over the SFT checkpoint it started from, paired run by run on the instances "
        "of its own suite(s) (where the SFT was scored on them).",
    ]
    if any(is_null_arm(arm) for summary in results.wide for arm in summary.arms):
        out[-1] += (
            " `_null-kl<KL>` is the null control (`bat experiment --null-control`): the shared SFT moved along seeded "
            "random directions to KL <KL> from it (on the route's probe prompts), one direction per seed; its gain "
            "over the SFT is what a change of that size scores without learning."
        )
    return out


def _reference_cells(row: PowerComparison | None) -> list[str]:
    """The five cells of an arm's comparison with the reference (difference, p, runs, per-run SD, detectable gap):
    paired, unpaired or anchored on the SFT; the error in the first cell, or empty cells without a row."""
    if row is None:
        return ["", "", "", "", ""]
    if row.error is not None:
        return [row.error, "", "", "", ""]
    assert row.mean_delta is not None and row.half_width is not None and row.minimum_detectable is not None
    head = [f"{100 * row.mean_delta:+.1f} +- {100 * row.half_width:.1f}", f"{row.p_value:.2f}"]
    if row.design in ("unpaired", "anchored"):
        n_ref, n_arm = row.n_runs  # type: ignore[misc]
        runs = f"{_DESIGN_NAMES[row.design]}: {n_ref} vs {n_arm}"
        if row.unpaired is not None:
            runs += f" (unpaired: {100 * (row.unpaired.mean_delta or 0.0):+.1f})"
        return [*head, runs, f"{100 * (row.sd or [0.0, 0.0])[1]:.1f}", f"{100 * row.minimum_detectable:.1f}"]
    sd = row.sd_delta or 0.0
    return [*head, f"{row.runs_differing}/{row.n_runs}", f"{100 * sd:.1f}", f"{100 * row.minimum_detectable:.1f}"]


def _null_table(summary: WideSummary) -> list[str]:
    """Per null control, each arm's gain over the SFT beside its gain beyond the null's (none without one)."""
    out: list[str] = []
    for null, rows in summary.vs_null.items():
        out += [
            "",
            f"Gain over the SFT beyond `{null}`'s ({_gain_cell(summary.vs_anchor.get(null))}): each arm's per-run "
            "gains over the SFT against the null control's, Welch over runs.",
            "",
            *table_head(["arm", "arm - SFT (own suite)", f"arm - SFT beyond {null}", "p", "runs"]),
        ]
        for arm, row in rows.items():
            gain = _gain_cell(summary.vs_anchor.get(arm))
            if row.error is not None:
                out.append(f"| {arm} | {gain} | {row.error} | | |")
                continue
            assert row.mean_delta is not None and row.half_width is not None
            out.append(
                f"| {arm} | {gain} | {100 * row.mean_delta:+.1f} +- {100 * row.half_width:.1f} | "
                f"{row.p_value:.3f} | " + "{} vs {} |".format(*row.n_runs)  # type: ignore[misc]
            )
    return out


_DESIGN_NAMES = {"unpaired": "unpaired", "anchored": "anchored on the SFT"}


def _gain_cell(gain: PowerComparison | None) -> str:
    """An arm's paired gain over the SFT on its own suites: mean +- half-width (p, runs)."""
    if gain is None:
        return ""
    if gain.error is not None:
        return gain.error
    assert gain.mean_delta is not None and gain.half_width is not None
    return f"{100 * gain.mean_delta:+.1f} +- {100 * gain.half_width:.1f} (p {gain.p_value:.3f}, {gain.n_runs} runs)"


def _profile_table(arms: dict[str, WideArmSummary]) -> list[str]:
    """Markdown lines of the table of where each arm's score comes from: mean Task and Agentic, Overall per track."""
    tracks = sorted({track for data in arms.values() for track in data.by_track})
    if not tracks:
        return []
    out = [
        "",
        "Where the score comes from (mean over runs and seeds): the two halves of Overall, and Overall per track.",
        "",
        *table_head(["arm", "Task", "Agentic", *tracks]),
    ]
    for arm, data in arms.items():
        cells = [data.components.get(metric) for metric in ("task", "agentic")]
        cells += [data.by_track.get(track) for track in tracks]
        out.append(f"| {arm} | " + " | ".join("" if v is None else f"{100 * v:.1f}" for v in cells) + " |")
    return out
