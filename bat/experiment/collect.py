"""Gather per-arm results from training-side files only: end-of-run aggregates, controller curves, counts, wall.

Reads, per arm x seed state dir (or, where that dir holds no finished run, the arm x seed's committed record under
`<out_dir>/runs/`, `bat.experiment.pieces`): `experiment_arm.json`, `round_NN/final_test/aggregate_<split>.json`,
`round_NN/evaluate/aggregate_controller.json`, `round_NN/route/best.json`, `round_NN/route/decision.json` (the
action and KL of each RL round), DONE.json counts and the training rewards of `round_NN/verify/` (mean reward and
identical GRPO groups per pool) and `run.json` (the matched-budget fields the run actually ran under). Writes nothing. A trained arm x seed that ran under other budget fields than the
experiment file now resolves to is `stale`: listed, never averaged (supersede it to rerun).
Across seeds: per-track values are averaged over seeds, then the arm mean is the mean of track means with a t
half-width across tracks (the track is the statistical unit); the seed spread is the SD/min/max of seed means.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from scipy import stats

from bat.config.load import ConfigError
from bat.config.run_record import recorded_config
from bat.curriculum.arms import resolve_arm
from bat.curriculum.history import load_best_after, load_decision
from bat.evaluate.aggregate import half_width
from bat.evaluate.store import load_aggregate
from bat.experiment.execute import FINAL_PHASE, read_arm_record
from bat.experiment.pieces import read_arm_piece, read_shared_piece, superseded_records
from bat.experiment.share import ROUND0_PHASES, arm_dir, shared_dir
from bat.experiment.spec import (
    BUDGET_FIELD_DEFAULTS,
    ExperimentSpec,
    arm_config,
    bootstrap_seed_of,
    budget_signature,
)
from bat.schemas.evaluation import METRICS, EvalAggregate
from bat.state.atomic import read_json
from bat.state.errors import StateFileError
from bat.state.experiment_layout import SHARED_RECORD_NAME
from bat.state.layout import RunLayout
from bat.state.markers import read_done
from bat.verify.shards import read_rewards
from bat.verify.signal import pool_signal

END_SPLITS = ("final", "test")
"""Splits of the end-of-run evaluation (`final_test` phase); `spec.report_split` picks the table's."""


def _metric(agg_or_track: Any, metric: str) -> float | None:
    return getattr(agg_or_track, metric) if metric in METRICS else agg_or_track.stages.get(metric)


def _counts(layout: RunLayout) -> dict[str, Any]:
    """Rollouts, GRPO steps and compute seconds of the arm's own phases (copied round-0 phases excluded)."""
    rollouts = steps = tokens = rl_rounds = 0
    compute = 0.0
    signal: dict[int, dict[str, Any]] = {}
    for r in layout.rounds():
        for phase_dir in sorted(p for p in layout.round_dir(r).iterdir() if p.is_dir()):
            done = read_done(phase_dir)
            if done is None or (r == 0 and phase_dir.name in ROUND0_PHASES):
                continue
            compute += float(done.extra.get("compute_s", 0.0))
            if phase_dir.name == "rollout":
                rollouts += int(done.counts.get("rollouts", 0))
                tokens += int(done.counts.get("generated_tokens", 0))
            if phase_dir.name == "verify" and r > 0:
                signal.setdefault(r, {}).update(
                    reward_mean=done.counts.get("reward_mean"),
                    rewards=done.counts.get("rewards"),
                    by_pool=pool_signal(read_rewards(phase_dir)),
                )
            if phase_dir.name == "grpo":
                steps += int(done.counts.get("step", 0))
                rl_rounds += 1
                signal.setdefault(r, {}).update(
                    groups=done.counts.get("groups"), groups_identical=done.counts.get("groups_identical_rewards")
                )
            if phase_dir.name == "route" and r > 0:
                decision = load_decision(layout, r)
                if decision is not None:
                    signal.setdefault(r, {}).update(route=decision.action, kl=decision.kl)
    plan_rows = plan_unique = 0
    for r in layout.rounds():
        if r >= 1 and layout.plan(r).exists():
            ids = [row["state_id"] for batch in read_json(layout.plan(r))["batches"] for row in batch]
            plan_rows, plan_unique = plan_rows + len(ids), plan_unique + len(set(ids))
    # signal, per RL round: mean training reward, GRPO groups and how many had identical rewards (zero advantage),
    # and the route's action on the round's candidate with the KL it measured
    return {
        "rollouts": rollouts,
        "grpo_steps": steps,
        "generated_tokens": tokens,
        "compute_s": round(compute, 3),
        "signal": [{"round": r, **signal[r]} for r in sorted(signal) if "reward_mean" in signal[r]],
        "rl_rounds": rl_rounds,
        "plan_rows": plan_rows,
        "plan_unique_rows": plan_unique,
    }


def _curve(layout: RunLayout) -> dict[str, list]:
    """Per round: controller Overall (raw), the retained best's controller score after that round, and the round's
    controller stage scores (`stages`, stage key -> 0-1 or None)."""
    rounds, raw, best, stages = [], [], [], []
    for r in layout.rounds():
        agg = load_aggregate(layout, r, "controller")
        after = load_best_after(layout, r)
        if agg is None or after is None:
            continue
        rounds.append(r)
        raw.append(agg.overall)
        best.append(after.score)
        stages.append(dict(agg.stages))
    return {"rounds": rounds, "raw": raw, "best": best, "stages": stages}


def _run_budget(layout: RunLayout) -> dict[str, Any] | None:
    """The matched-budget fields (`budget_signature`) of the config the run ran under (its `run.json`), or None when
    it has no readable one."""
    try:
        cfg = recorded_config(layout)
    except (ConfigError, StateFileError, KeyError, TypeError):
        return None
    return None if cfg is None else budget_signature(cfg)


RL_ONLY_FIELDS = ("curriculum.", "rollout.", "grpo.")
"""Budget fields that only an arm with RL rounds uses (the sft arm's run is held to the others only)."""


def expected_budget(cfg: Any) -> dict[str, Any]:
    """The budget fields an arm x seed under `cfg` must have run under: all of `budget_signature`, less the RL-only
    fields for an arm without RL rounds."""
    sig = budget_signature(cfg)
    if resolve_arm(cfg.curriculum).rl:
        return sig
    return {k: v for k, v in sig.items() if not k.startswith(RL_ONLY_FIELDS)}


def mark_stale(seed_run: dict[str, Any], expected: dict[str, Any]) -> None:
    """Set a finished arm x seed whose recorded `budget` differs from `expected` to status `stale`, with
    `stale_fields` = field -> [recorded, expected]; a field the record predates counts as its
    `BUDGET_FIELD_DEFAULTS` value. Runs without a recorded budget are left as they are."""
    recorded = seed_run.get("budget")
    if seed_run.get("status") != "done" or recorded is None:
        return
    ran = {k: recorded.get(k, BUDGET_FIELD_DEFAULTS.get(k)) for k in expected}
    diff = {k: [ran[k], v] for k, v in expected.items() if ran[k] != v}
    if diff:
        seed_run["status"] = "stale"
        seed_run["stale_fields"] = diff


def seed_result(spec: ExperimentSpec, arm_name: str, seed: int) -> dict[str, Any]:
    """Everything about one arm x seed read from its state dir (status, end-of-run aggregate, curve, counts, shared
    SFT digests); `source: state`."""
    record = read_arm_record(spec, seed, arm_name) or {"status": "not run"}
    out: dict[str, Any] = {
        "seed": seed,
        "source": "state",
        "status": record.get("status"),
        "error": record.get("error"),
        "wall_s": record.get("wall_s"),
        "attempts": record.get("attempts", 0),
        "shared_sft_digest": record.get("shared_sft_digest"),
    }
    layout = RunLayout(arm_dir(spec, seed, arm_name))
    if not layout.root.exists():
        return out
    out.update(_counts(layout))
    out["budget"] = _run_budget(layout)
    out["curve"] = _curve(layout)
    ctrl0 = load_aggregate(layout, 0, "controller")
    best0 = load_best_after(layout, 0)
    out["round0_eval_digest"] = ctrl0.checkpoint_digest if ctrl0 else None
    out["round1_start_digest"] = best0.checkpoint_digest if best0 else None
    final_round = record.get("final_round")
    out["final_round"] = final_round
    out["aggregates"] = {}
    for split in END_SPLITS:
        agg = load_aggregate(layout, final_round, split, FINAL_PHASE) if final_round is not None else None
        if agg is not None:
            out["aggregates"][split] = agg.model_dump(mode="json")
    out["aggregate"] = out["aggregates"].get(spec.report_split)
    return out


def merged_seed_result(spec: ExperimentSpec, arm_name: str, seed: int, out_dir: Path) -> dict[str, Any]:
    """The arm x seed from its state dir when that holds a finished run, else its committed record, else what the
    state dir says (not run, failed, running)."""
    local = seed_result(spec, arm_name, seed)
    if local.get("status") == "done":
        return local
    return read_arm_piece(out_dir, arm_name, seed) or local


def arm_summary(aggs: list[EvalAggregate], stage_keys: list[str], confidence: float) -> dict[str, Any]:
    """Mean of seed-averaged track means, t half-width across tracks, and seed spread, per metric."""
    metrics = [*METRICS, *stage_keys]
    out: dict[str, Any] = {
        "n_seeds": len(aggs),
        "mean": {},
        "half_width": {},
        "seed_sd": {},
        "seed_min": {},
        "seed_max": {},
        "track_means": {},
    }
    if not aggs:
        return out
    tracks = sorted(set.intersection(*(set(a.tracks) for a in aggs)))
    for m in metrics:
        per_track = {}
        for t in tracks:
            vals = [_metric(a.tracks[t], m) for a in aggs]
            per_track[t] = None if any(v is None for v in vals) else sum(vals) / len(vals)
        seed_vals = [_metric(a, m) for a in aggs]
        if not per_track or any(v is None for v in per_track.values()) or any(v is None for v in seed_vals):
            out["mean"][m] = None
            continue
        track_vals = list(per_track.values())
        out["track_means"][m] = per_track
        out["mean"][m] = sum(track_vals) / len(track_vals)
        out["half_width"][m] = half_width(track_vals, confidence)
        out["seed_sd"][m] = statistics.stdev(seed_vals) if len(seed_vals) >= 2 else None
        out["seed_min"][m], out["seed_max"][m] = min(seed_vals), max(seed_vals)
    return out


def compare(
    ref: dict[str, Any], other: dict[str, Any], confidence: float, metric: str = "overall"
) -> dict[str, Any] | None:
    """Paired per-track comparison ref - other of seed-averaged track means: mean, t half-width, p-value."""
    a, b = ref["track_means"].get(metric), other["track_means"].get(metric)
    if not a or not b or set(a) != set(b):
        return None
    deltas = {t: a[t] - b[t] for t in sorted(a)}
    values = list(deltas.values())
    p = None
    if len(values) >= 2 and statistics.stdev(values) > 0:
        p = float(stats.ttest_1samp(values, 0.0).pvalue)
    return {
        "metric": metric,
        "deltas": deltas,
        "mean_delta": sum(values) / len(values),
        "half_width": half_width(values, confidence),
        "p_value": p,
        "n_tracks": len(values),
    }


def held_out_profile(arms: dict[str, Any], stage_keys: list[str], confidence: float) -> dict[str, Any] | None:
    """Per end-of-run split and RL arm, each stage before RL (the first trained arm without RL rounds, the SFT
    checkpoint every RL arm starts from) and after (the arm's retained best): both means and the paired per-track
    change `after - before` with its half-width (`compare`). None when the experiment has no such `before` arm."""
    before = next((n for n, a in arms.items() if a["kind"] == "trained" and not a["rl"]), None)
    if before is None:
        return None
    out: dict[str, Any] = {"before": before, "splits": {}}
    for split in END_SPLITS:
        base = arms[before]["summaries"].get(split)
        rows = {}
        for name, arm in arms.items():
            after = arm["summaries"].get(split)
            if not arm["rl"] or base is None or after is None:
                continue
            rows[name] = {
                k: {
                    "before": base["mean"].get(k),
                    "after": after["mean"].get(k),
                    "change": compare(after, base, confidence, metric=k),
                }
                for k in stage_keys
            }
        if rows:
            out["splits"][split] = rows
    return out


def _budget(spec: ExperimentSpec, arms: dict[str, Any]) -> dict[str, Any]:
    """Matched-budget audit: resolved budget fields equal across trained arms; RL arms' rollouts/steps per seed."""
    sigs = {a.name: budget_signature(arm_config(spec, a, spec.seeds[0])) for a in spec.arms if a.kind == "trained"}
    first = next(iter(sigs.values()), {})
    differing = sorted({k for s in sigs.values() for k in s if s[k] != first.get(k)})
    rl = [
        a.name
        for a in spec.arms
        if a.kind == "trained" and resolve_arm(arm_config(spec, a, spec.seeds[0]).curriculum).rl
    ]
    per_seed = {}
    for seed in spec.seeds:
        runs = {n: next((s for s in arms[n]["seeds"] if s["seed"] == seed), {}) for n in rl}
        done = {n: s for n, s in runs.items() if s.get("status") == "done"}
        per_seed[str(seed)] = {
            "rollouts": sorted({s["rollouts"] for s in done.values()}),
            "grpo_steps": sorted({s["grpo_steps"] for s in done.values()}),
            "cycled": {
                n: [s["plan_rows"], s["plan_unique_rows"]]
                for n, s in done.items()
                if s["plan_unique_rows"] < s["plan_rows"]
            },
        }
    # every trained arm x seed served by one bootstrap must have trained from the same SFT checkpoint (a bootstrap
    # rebuilt on another CPU kind in a later piece may differ in the last bits)
    sft_digests: dict[str, dict[str, list[str]]] = {}
    for a in spec.arms:
        if a.kind != "trained":
            continue
        for s in arms[a.name]["seeds"]:
            digest = s.get("shared_sft_digest")
            if s.get("status") == "done" and digest:
                boot = str(bootstrap_seed_of(spec, s["seed"]))
                sft_digests.setdefault(boot, {}).setdefault(digest[:16], []).append(f"{a.name}/s{s['seed']}")
    one_bootstrap = all(len(d) <= 1 for d in sft_digests.values())
    trained = [(a.name, s) for a in spec.arms if a.kind == "trained" for s in arms[a.name]["seeds"]]
    stale = {f"{n}/s{s['seed']}": s["stale_fields"] for n, s in trained if s.get("status") == "stale"}
    unverified = [f"{n}/s{s['seed']}" for n, s in trained if s.get("status") == "done" and s.get("budget") is None]
    matched = (
        not differing
        and not stale
        and one_bootstrap
        and all(len(v["rollouts"]) <= 1 and len(v["grpo_steps"]) <= 1 for v in per_seed.values())
    )
    return {
        "matched": matched,
        "differing_fields": differing,
        "stale": stale,
        "unverified": unverified,
        "sft_digests": sft_digests,
        "one_bootstrap": one_bootstrap,
        "rl_arms": rl,
        "per_seed": per_seed,
        "signature": first,
        "note": "cycled = arm: [plan rows, distinct rows]; a pool smaller than a round repeats "
        "rows: each listing still gets K rollouts (extra members of the state's one GRPO group), so the "
        "rollout count matches but that arm sees fewer distinct states (enlarge the bank)",
    }


def collect(spec: ExperimentSpec, out_dir: Path | None = None) -> dict[str, Any]:
    """The content of results.json: per-arm summaries, per-seed runs, comparisons vs the reference (on the report
    split, and per end-of-run split), the held-out stage profile before and after RL, budget audit.

    Arm x seeds finished in earlier pieces come from their committed records under `<out_dir>/runs/` (default
    `spec.out_dir`) where this disk has no finished state for them."""
    out = Path(out_dir or spec.out_dir)
    cfg = arm_config(spec, spec.arms[0], spec.seeds[0])
    stage_keys, confidence = list(cfg.stage_keys), cfg.evaluate.confidence
    arms: dict[str, Any] = {}
    for arm in spec.arms:
        seeds = [merged_seed_result(spec, arm.name, s, out) for s in spec.seeds]
        if arm.kind == "trained":
            for seed_run in seeds:
                mark_stale(seed_run, expected_budget(arm_config(spec, arm, seed_run["seed"])))
        summaries = {}
        for split in END_SPLITS:
            aggs = [
                EvalAggregate.model_validate(s["aggregates"][split])
                for s in seeds
                if s.get("status") == "done" and split in s.get("aggregates", {})
            ]
            if aggs:
                summaries[split] = arm_summary(aggs, stage_keys, confidence)
        walls = [s["wall_s"] for s in seeds if s.get("wall_s") is not None]
        arms[arm.name] = {
            "kind": arm.kind,
            "rl": arm.kind == "trained" and resolve_arm(arm_config(spec, arm, spec.seeds[0]).curriculum).rl,
            "overrides": list(arm.overrides),
            "seeds": seeds,
            "summary": summaries.get(spec.report_split, arm_summary([], stage_keys, confidence)),
            "summaries": summaries,
            "wall_s_mean": sum(walls) / len(walls) if walls else None,
            "failed": [s["seed"] for s in seeds if s.get("status") == "failed"],
        }
    ref = spec.reference
    comparisons = {
        name: compare(arms[ref]["summary"], data["summary"], confidence) for name, data in arms.items() if name != ref
    }
    comparisons_by_split = {
        split: {
            name: (
                compare(arms[ref]["summaries"][split], data["summaries"][split], confidence)
                if split in arms[ref]["summaries"] and split in data["summaries"]
                else None
            )
            for name, data in arms.items()
            if name != ref
        }
        for split in END_SPLITS
    }
    shared = {}
    for seed in spec.seeds:
        rec = shared_dir(spec, seed) / SHARED_RECORD_NAME
        committed = read_shared_piece(out, bootstrap_seed_of(spec, seed))
        if rec.exists():
            shared[str(seed)] = read_json(rec)
        elif committed is not None:
            shared[str(seed)] = {**committed, "source": "committed"}
    return {
        "schema_version": 1,
        "experiment": spec.name,
        "base_config": str(spec.base_config),
        "overrides": list(spec.overrides),
        "seeds": list(spec.seeds),
        "bootstrap_seed": spec.bootstrap_seed,
        "report_split": spec.report_split,
        "stage_keys": stage_keys,
        "confidence": confidence,
        "reference_arm": ref,
        "arms": arms,
        "comparisons": comparisons,
        "comparisons_by_split": comparisons_by_split,
        "held_out_profile": held_out_profile(arms, stage_keys, confidence),
        "budget": _budget(spec, arms),
        "shared": shared,
        "superseded": superseded_records(out),
    }
