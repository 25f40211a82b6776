"""The summary of an experiment's committed wide records (`bat.experiment.wide`, `bat.experiment.anchor`), for the
results' `wide` entry: per repeats value, each arm's seeds, suites, mean Overall and where it comes from, and every arm
against the reference arm (paired within one held-out suite; across suites anchored on the shared SFT, else Welch).

Reads the committed records under `<out_dir>/wide/`; writes nothing.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from bat.experiment.wide import read_anchor_pieces, read_wide_pieces
from bat.schemas.experiment import WideRecord
from bat.schemas.experiment_results import PowerComparison, WideArmSummary, WideSummary
from bat.state.experiment_layout import is_null_arm

Runs = dict[str, tuple[str, float]]
"""run id -> (instance, score): what `bat.experiment.power` pairs."""
Pair = tuple[Runs, Runs]


def _profile(records: list[WideRecord]) -> tuple[dict[str, float], dict[str, float]]:
    """Where an arm's wide score comes from, over all its seeds' runs (each seed has the same runs, so this is the
    mean of the seed-averaged runs): mean Task and Agentic (`components`, those the records carry) and mean Overall
    per track (`by_track`: the run's recorded track; records written before runs carried it name it in the run id)."""
    from bat.benchmark.suite import suite_run_track

    runs = [(run_id, run) for record in records for run_id, run in record.runs.items()]
    by_track: dict[str, list[float]] = {}
    for run_id, run in runs:
        by_track.setdefault(run.track or suite_run_track(run_id), []).append(run.overall)
    components = {}
    for metric in ("task", "agentic"):
        values = [getattr(run, metric) for _, run in runs if getattr(run, metric) is not None]
        if values:
            components[metric] = statistics.fmean(values)
    return components, {track: statistics.fmean(values) for track, values in sorted(by_track.items())}


def _suites(records: list[WideRecord]) -> list[list[WideRecord]]:
    """`records` (one arm's seeds) grouped by held-out suite: seeds whose runs face the same instances run by run
    share a group. Pieces run on another disk meet another experiment secret, so other instances."""
    from bat.experiment.power import run_alignment

    groups: list[tuple[Runs, list[WideRecord]]] = []  # (first seed's runs, seeds)
    for record in records:
        runs = record.run_scores()
        home = next((members for first, members in groups if not run_alignment(first, runs)), None)
        if home is None:
            groups.append((runs, [record]))
        else:
            home.append(record)
    return [members for _, members in groups]


def _suite_labels(arms: dict[str, list[list[WideRecord]]], reference: str) -> dict[str, list[str]]:
    """A letter per distinct suite (A = the reference arm's first), per arm in its groups' order."""
    from bat.experiment.power import run_alignment

    seen: list[Runs] = []
    labels: dict[str, list[str]] = {}
    for arm in sorted(arms, key=lambda name: name != reference):
        labels[arm] = []
        for group in arms[arm]:
            runs = group[0].run_scores()
            index = next((i for i, other in enumerate(seen) if not run_alignment(other, runs)), None)
            if index is None:
                seen.append(runs)
                index = len(seen) - 1
            labels[arm].append(chr(ord("A") + index) if index < 26 else str(index))
    return labels


def _against_anchor(suites: list[Runs], anchors: list[Runs]) -> Pair | None:
    """An arm's runs on each of its suites (`suites`: seed-averaged per suite) beside the anchor's runs on the same
    suite (`anchors`: the shared SFT's runs, one entry per suite), run ids prefixed by the suite's index so that
    several suites pool: (arm runs, anchor runs). None when the anchor was not scored on every one of the suites."""
    from bat.experiment.power import run_alignment

    arm_runs: Runs = {}
    anchor_runs: Runs = {}
    for index, suite in enumerate(suites):
        anchor = next((a for a in anchors if not run_alignment(a, suite)), None)
        if anchor is None:
            return None
        for rid in suite:
            arm_runs[f"{index}/{rid}"], anchor_runs[f"{index}/{rid}"] = suite[rid], anchor[rid]
    return arm_runs, anchor_runs


def _gains(pair: Pair) -> list[float]:
    """Per-run differences, arm - anchor, of `_against_anchor`'s pair."""
    arm_runs, anchor_runs = pair
    return [arm_runs[rid][1] - anchor_runs[rid][1] for rid in sorted(arm_runs)]


def _compared(compute: Any, *args: Any, **kwargs: Any) -> PowerComparison:
    """`compute(*args, **kwargs)` (a `bat.experiment.power` comparison) as a record; an `error` row when the runs
    cannot be compared."""
    from bat.experiment.power import PowerInputError

    try:
        return PowerComparison(**compute(*args, **kwargs))
    except PowerInputError as exc:
        return PowerComparison(error=str(exc))


def _against_null(
    paired_with_anchor: dict[str, Pair | None], confidence: float
) -> dict[str, dict[str, PowerComparison]]:
    """Per null control (`bat.experiment.null_control`, arms `_null-kl<KL>`), each other arm's gain over the SFT
    beyond the null's: Welch over the two sets of per-run gains over the SFT (each paired with the SFT on its own
    suite), arm - null; empty without a null control anchored on the SFT."""
    from bat.experiment.power import unpaired_comparison

    out: dict[str, dict[str, PowerComparison]] = {}
    for null, null_pair in paired_with_anchor.items():
        if not is_null_arm(null) or null_pair is None:
            continue
        out[null] = {
            arm: _compared(unpaired_comparison, _gains(pair), _gains(null_pair), confidence=confidence)
            for arm, pair in paired_with_anchor.items()
            if not is_null_arm(arm) and pair is not None
        }
    return out


def _vs_reference(
    scores: dict[str, list[Runs]],
    labels: dict[str, list[str]],
    paired_with_anchor: dict[str, Pair | None],
    reference: str,
    confidence: float,
) -> dict[str, PowerComparison]:
    """Every arm against `reference`: paired run by run on one shared suite; across suites unpaired (Welch) over the
    pooled runs, or anchored on the SFT (the plain unpaired row kept under `unpaired`) where both arms have it."""
    from bat.experiment.power import PowerInputError, paired_comparison, unpaired_comparison

    if reference not in scores:
        return {}
    pooled = {arm: [v for suite in suites for _, v in suite.values()] for arm, suites in scores.items()}
    rows: dict[str, PowerComparison] = {}
    for arm in scores:
        if arm == reference:
            continue
        try:
            if labels[arm] == labels[reference] and len(labels[arm]) == 1:
                rows[arm] = PowerComparison(
                    **paired_comparison(scores[reference][0], scores[arm][0], confidence=confidence)
                )
                continue
            plain = PowerComparison(**unpaired_comparison(pooled[reference], pooled[arm], confidence=confidence))
            rows[arm] = plain
            ref_pair, arm_pair = paired_with_anchor[reference], paired_with_anchor[arm]
            if ref_pair is not None and arm_pair is not None:
                anchored = unpaired_comparison(_gains(ref_pair), _gains(arm_pair), confidence=confidence)
                rows[arm] = PowerComparison(**{**anchored, "design": "anchored"}, unpaired=plain)
        except PowerInputError as exc:
            rows[arm] = PowerComparison(error=str(exc))
    return rows


def _arm_summary(records: list[WideRecord], labels: list[str], groups: list[list[WideRecord]], pooled: list[float]):
    """One arm of a wide summary: seeds, seeds per suite letter, runs, mean Overall, its profile."""
    components, by_track = _profile(records)
    return WideArmSummary(
        seeds=[r.seed for r in records],
        suites={label: [r.seed for r in g] for label, g in zip(labels, groups)},
        n_runs=len(pooled),
        mean=statistics.fmean(pooled),
        components=components,
        by_track=by_track,
    )


def wide_summary(
    out_dir: Path, reference: str, *, confidence: float = 0.95, anchor_digests: tuple[str, ...] = ()
) -> list[WideSummary]:
    """Per repeats value of the committed wide records: each arm's seeds, mean Overall over runs and its profile
    (`_profile`), and every arm against `reference` (`bat.experiment.power`): paired run by run when both arms'
    seeds faced one held-out suite (scores averaged over an arm's seeds per run). Across suites (an arm's seeds on
    another disk's suite) a suite's own difficulty enters a plain difference, so when a checkpoint of
    `anchor_digests` (the shared SFT, which every disk rebuilds bit-identically) was scored on every suite of both
    arms the row compares their gains over it run by run on their own suites (`anchored`: Welch over the two sets of
    per-run gains, an arm's suites pooled; the plain Welch row under `unpaired`), else
    unpaired (Welch) over the runs of each suite (seed-averaged within it); `suites` names each arm's suites by
    letter (A: the reference's). The SFT's runs on a suite come from an arm's record of that checkpoint or from the
    suite's anchor record (`bat.experiment.anchor`). `vs_anchor`: each arm's gain over that SFT on its own suites,
    paired run by run (`_against_anchor`), where the SFT was scored on all of them. `vs_null`: per null control,
    each arm's gain beyond the null's (`_against_null`), where one was scored."""
    from bat.experiment.power import paired_comparison, seed_average

    by_repeats: dict[int, dict[str, list[WideRecord]]] = {}
    for record in read_wide_pieces(out_dir):
        by_repeats.setdefault(record.repeats, {}).setdefault(record.arm, []).append(record)
    anchor_pieces = read_anchor_pieces(out_dir)
    summaries = []
    for repeats, arms in sorted(by_repeats.items()):
        groups = {arm: _suites(records) for arm, records in arms.items()}
        labels = _suite_labels(groups, reference)
        scores = {
            arm: [seed_average([r.run_scores() for r in group]) for group in arm_groups]
            for arm, arm_groups in groups.items()
        }
        pooled = {arm: [v for suite in suites for _, v in suite.values()] for arm, suites in scores.items()}
        anchor_records = [r for rs in arms.values() for r in rs if r.checkpoint_digest in anchor_digests]
        anchor_records += [r for r in anchor_pieces if r.repeats == repeats and r.checkpoint_digest in anchor_digests]
        anchors = [group[0].run_scores() for group in _suites(anchor_records)]  # one scoring per suite
        paired_with_anchor = {arm: _against_anchor(suites, anchors) for arm, suites in scores.items()}
        gains = {
            arm: _compared(paired_comparison, *pair, confidence=confidence)
            for arm, pair in paired_with_anchor.items()
            if pair is not None
        }
        summaries.append(
            WideSummary(
                repeats=repeats,
                arms={
                    arm: _arm_summary(records, labels[arm], groups[arm], pooled[arm]) for arm, records in arms.items()
                },
                vs_reference=_vs_reference(scores, labels, paired_with_anchor, reference, confidence),
                vs_anchor=gains,
                vs_null=_against_null(paired_with_anchor, confidence),
            )
        )
    return summaries
