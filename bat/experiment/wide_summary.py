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


def _profile(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Where an arm's wide score comes from, over all its seeds' runs (each seed has the same runs, so this is the
    mean of the seed-averaged runs): mean Task and Agentic (`components`, those the records carry) and mean Overall
    per track (`by_track`: the run's recorded track; records written before runs carried it name it in the run id)."""
    from bat.benchmark.suite import suite_run_track

    runs = [(run_id, run) for record in records for run_id, run in record["runs"].items()]
    by_track: dict[str, list[float]] = {}
    for run_id, run in runs:
        by_track.setdefault(run.get("track") or suite_run_track(run_id), []).append(run["overall"])
    components = {}
    for metric in ("task", "agentic"):
        values = [run[metric] for _, run in runs if run.get(metric) is not None]
        if values:
            components[metric] = statistics.fmean(values)
    return {
        "components": components,
        "by_track": {track: statistics.fmean(values) for track, values in sorted(by_track.items())},
    }


def _suites(records: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """`records` (one arm's seeds) grouped by held-out suite: seeds whose runs face the same instances run by run
    share a group. Pieces run on another disk meet another experiment secret, so other instances."""
    from bat.experiment.power import run_alignment

    groups: list[list[dict[str, Any]]] = []
    for record in records:
        runs = _run_scores(record)
        home = next((g for g in groups if not run_alignment(_run_scores(g[0]), runs)), None)
        if home is None:
            groups.append([record])
        else:
            home.append(record)
    return groups


def _run_scores(record: dict[str, Any]) -> dict[str, tuple[str, float]]:
    return {rid: (run["instance_id"], run["overall"]) for rid, run in record["runs"].items()}


def _suite_labels(arms: dict[str, list[list[dict[str, Any]]]], reference: str) -> dict[str, list[str]]:
    """A letter per distinct suite (A = the reference arm's first), per arm in its groups' order."""
    from bat.experiment.power import run_alignment

    seen: list[dict[str, tuple[str, float]]] = []
    labels: dict[str, list[str]] = {}
    for arm in sorted(arms, key=lambda name: name != reference):
        labels[arm] = []
        for group in arms[arm]:
            runs = _run_scores(group[0])
            index = next((i for i, other in enumerate(seen) if not run_alignment(other, runs)), None)
            if index is None:
                seen.append(runs)
                index = len(seen) - 1
            labels[arm].append(chr(ord("A") + index) if index < 26 else str(index))
    return labels


def _anchored(
    ref: dict[str, tuple[str, float]],
    arm: dict[str, tuple[str, float]],
    anchors: list[dict[str, tuple[str, float]]],
    confidence: float,
) -> dict[str, Any] | None:
    """`ref - arm` across two held-out suites through a checkpoint scored on both (`anchors`: the shared SFT's runs,
    one entry per suite): each arm paired run by run with the anchor on its own suite, then the two mean differences
    compared (Welch over the two sets of per-run differences). None when the anchor was not scored on both suites."""
    from bat.experiment.power import run_alignment, unpaired_comparison

    on_ref = next((a for a in anchors if not run_alignment(a, ref)), None)
    on_arm = next((a for a in anchors if not run_alignment(a, arm)), None)
    if on_ref is None or on_arm is None:
        return None
    ref_gain = [ref[rid][1] - on_ref[rid][1] for rid in sorted(ref)]
    arm_gain = [arm[rid][1] - on_arm[rid][1] for rid in sorted(arm)]
    return {**unpaired_comparison(ref_gain, arm_gain, confidence=confidence), "design": "anchored"}


def _gain_over_anchor(
    suites: list[dict[str, tuple[str, float]]],
    anchors: list[dict[str, tuple[str, float]]],
    confidence: float,
) -> dict[str, Any] | None:
    """`arm - anchor` paired run by run on each of the arm's suites (`suites`: its seed-averaged runs per suite), the
    per-run differences of all its suites pooled (`bat.experiment.power.paired_comparison` over run ids prefixed by
    the suite): the arm's RL gain over the SFT it started from, measured on the instances it met. None when the
    anchor was not scored on every one of the arm's suites."""
    from bat.experiment.power import paired_comparison, run_alignment

    arm_runs: dict[str, tuple[str, float]] = {}
    anchor_runs: dict[str, tuple[str, float]] = {}
    for index, suite in enumerate(suites):
        anchor = next((a for a in anchors if not run_alignment(a, suite)), None)
        if anchor is None:
            return None
        for rid in suite:
            arm_runs[f"{index}/{rid}"], anchor_runs[f"{index}/{rid}"] = suite[rid], anchor[rid]
    return paired_comparison(arm_runs, anchor_runs, confidence=confidence)


def wide_summary(
    out_dir: Path, reference: str, *, confidence: float = 0.95, anchor_digests: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """Per repeats value of the committed wide records: each arm's seeds, mean Overall over runs and its profile
    (`_profile`), and every arm against `reference` (`bat.experiment.power`): paired run by run when both arms'
    seeds faced one held-out suite (scores averaged over an arm's seeds per run). Across suites (an arm's seeds on
    another disk's suite) a suite's own difficulty enters a plain difference, so when a checkpoint of
    `anchor_digests` (the shared SFT, which every disk rebuilds bit-identically) was scored on both suites the row
    compares each arm's gain over it on its own suite (`anchored`, with the plain Welch row under `unpaired`), else
    unpaired (Welch) over the runs of each suite (seed-averaged within it); `suites` names each arm's suites by
    letter (A: the reference's). The SFT's runs on a suite come from an arm's record of that checkpoint or from the
    suite's anchor record (`bat.experiment.anchor`). `vs_anchor`: each arm's gain over that SFT on its own suites,
    paired run by run (`_gain_over_anchor`), where the SFT was scored on all of them."""
    from bat.experiment.power import PowerInputError, paired_comparison, seed_average, unpaired_comparison

    by_repeats: dict[int, dict[str, list[dict[str, Any]]]] = {}
    for record in read_wide_pieces(out_dir):
        by_repeats.setdefault(record["repeats"], {}).setdefault(record["arm"], []).append(record)
    anchor_pieces = read_anchor_pieces(out_dir)
    summaries = []
    for repeats, arms in sorted(by_repeats.items()):
        groups = {arm: _suites(records) for arm, records in arms.items()}
        labels = _suite_labels(groups, reference)
        scores = {
            arm: [seed_average([_run_scores(r) for r in group]) for group in arm_groups]
            for arm, arm_groups in groups.items()
        }
        pooled = {arm: [v for suite in suites for _, v in suite.values()] for arm, suites in scores.items()}
        anchor_records = [r for rs in arms.values() for r in rs if r.get("checkpoint_digest") in anchor_digests]
        anchor_records += [
            r for r in anchor_pieces if r["repeats"] == repeats and r["checkpoint_digest"] in anchor_digests
        ]
        anchors = [seed_average([_run_scores(group[0])]) for group in _suites(anchor_records)]
        rows: dict[str, Any] = {}
        gains: dict[str, Any] = {}
        for arm, suites in scores.items():
            try:
                gain = _gain_over_anchor(suites, anchors, confidence) if anchors else None
            except PowerInputError as exc:
                gain = {"error": str(exc)}
            if gain is not None:
                gains[arm] = gain
        if reference in scores:
            for arm in scores:
                if arm == reference:
                    continue
                try:
                    if labels[arm] == labels[reference] and len(labels[arm]) == 1:
                        rows[arm] = paired_comparison(scores[reference][0], scores[arm][0], confidence=confidence)
                    else:
                        rows[arm] = unpaired_comparison(pooled[reference], pooled[arm], confidence=confidence)
                        one_suite_each = len(scores[reference]) == 1 and len(scores[arm]) == 1
                        anchored = one_suite_each and _anchored(
                            scores[reference][0], scores[arm][0], anchors, confidence
                        )
                        if anchored:
                            rows[arm] = {**anchored, "unpaired": rows[arm]}
                except PowerInputError as exc:
                    rows[arm] = {"error": str(exc)}
        summaries.append(
            {
                "repeats": repeats,
                "arms": {
                    arm: {
                        "seeds": [r["seed"] for r in records],
                        "suites": {label: [r["seed"] for r in g] for label, g in zip(labels[arm], groups[arm])},
                        "n_runs": len(pooled[arm]),
                        "mean": statistics.fmean(pooled[arm]),
                        **_profile(records),
                    }
                    for arm, records in arms.items()
                },
                "vs_reference": rows,
                "vs_anchor": gains,
            }
        )
    return summaries
