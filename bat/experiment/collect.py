"""Gather per-arm results from training-side files only: end-of-run aggregates, controller curves, counts, wall.

Reads, per arm x seed state dir (or, where that dir holds no finished run, the arm x seed's committed record under
`<out_dir>/runs/`, `bat.experiment.pieces`): `experiment_arm.json`, `round_NN/final_test/aggregate_<split>.json`,
`round_NN/evaluate/aggregate_controller.json`, `round_NN/route/best.json`, `round_NN/route/decision.json` (the
action and KL of each RL round), DONE.json counts and the training rewards of `round_NN/verify/` (mean reward and
identical GRPO groups per pool) and `run.json` (the matched-budget fields the run actually ran under). Writes
nothing. A trained arm x seed that ran under other budget fields than the experiment file now resolves to is
`stale` (`bat.experiment.budget_audit`): listed, never averaged (supersede it to rerun). The statistics across
seeds and tracks are `bat.experiment.summary`'s.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

from bat.benchmark.secret import read_secret
from bat.config.load import ConfigError
from bat.config.run_record import recorded_config
from bat.curriculum.arms import resolve_arm
from bat.curriculum.history import load_best_after, load_decision
from bat.evaluate.store import load_aggregate
from bat.experiment.budget_audit import budget_audit, expected_budget, mark_stale
from bat.experiment.execute import FINAL_PHASE, open_attempt, read_arm_record
from bat.experiment.pieces import read_arm_piece, read_shared_piece, superseded_records
from bat.experiment.share import ROUND0_PHASES, arm_dir, shared_dir
from bat.experiment.spec import ExperimentSpec, arm_config, bootstrap_seed_of, budget_signature
from bat.experiment.summary import END_SPLITS, arm_summary, compare, held_out_profile
from bat.experiment.wide_summary import wide_summary
from bat.schemas.evaluation import EvalAggregate
from bat.state.atomic import read_json
from bat.state.errors import StateFileError
from bat.state.experiment_layout import SHARED_RECORD_NAME
from bat.state.layout import RunLayout
from bat.state.markers import read_done
from bat.verify.shards import read_rewards
from bat.verify.signal import pool_signal


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
                    groups=done.counts.get("groups"),
                    groups_identical=done.counts.get("groups_identical_rewards"),
                    grad_norm=(done.extra.get("last_step") or {}).get("grad_norm"),
                    adv_uncancelled=(done.extra.get("last_step") or {}).get("adv_uncancelled"),
                )
            if phase_dir.name == "route" and r > 0:
                decision = load_decision(layout, r)
                if decision is not None:
                    signal.setdefault(r, {}).update(route=decision.action, kl=decision.kl)
    for r, groups in _group_rewards(layout).items():
        if r in signal:
            signal[r]["group_rewards"] = groups
    plan_rows = plan_unique = 0
    for r in layout.rounds():
        if r >= 1 and layout.plan(r).exists():
            ids = [row["state_id"] for batch in read_json(layout.plan(r))["batches"] for row in batch]
            plan_rows, plan_unique = plan_rows + len(ids), plan_unique + len(set(ids))
    # signal, per RL round: mean training reward, GRPO groups and how many had identical rewards (zero advantage),
    # each GRPO group's rewards with its pool and bank state outcome (`group_rewards`: what
    # `bat.verify.signal_report` reads, kept with the piece once the state dir is gone),
    # the last GRPO step's gradient norm (before clipping) and uncancelled advantage share
    # (bat.train.advantage_balance), and the route's action on the round's candidate with the KL it measured
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


def _group_rewards(layout: RunLayout) -> dict[int, list[dict[str, Any]]]:
    """Per RL round with finished rewards: each GRPO group (state) with its pool, the bank state's outcome
    (success / recovery / failure, `e2e` for E2E rows) and its valid rewards (4 decimals), in (pool, state) order
    (`bat.verify.signal_report.state_groups`); empty when a round's plan or bank cannot be read (the rest of the
    collection does not depend on it)."""
    from bat.verify.signal_report import SignalReportError, state_groups

    try:
        rounds = state_groups(layout.root)
    except (SignalReportError, StateFileError, FileNotFoundError):
        return {}
    return {
        index: [
            {"state_id": state_id, "pool": pool, "outcome": label, "rewards": [round(v, 4) for v in values]}
            for pool, state_id, label, values in groups
        ]
        for index, groups in rounds.items()
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


def seed_result(spec: ExperimentSpec, arm_name: str, seed: int) -> dict[str, Any]:
    """Everything about one arm x seed read from its state dir (status, end-of-run aggregate, curve, counts, shared
    SFT digests); `source: state`. Status `unfinished` (with `attempt_started_at`, UTC) when an attempt is open in
    the state dir: running now, or stopped from outside before it could write its record."""
    record = read_arm_record(spec, seed, arm_name) or {"status": "not run"}
    attempt = open_attempt(arm_dir(spec, seed, arm_name))
    out: dict[str, Any] = {
        "seed": seed,
        "source": "state",
        "status": "unfinished" if attempt is not None else record.get("status"),
        "error": record.get("error"),
        "wall_s": record.get("wall_s"),
        "attempts": record.get("attempts", 0),
        "interrupted_attempts": record.get("interrupted_attempts", 0),
        "shared_sft_digest": record.get("shared_sft_digest"),
    }
    if attempt is not None:
        started = _dt.datetime.fromtimestamp(float(attempt["started_at"]), _dt.timezone.utc)
        out["attempt_started_at"] = started.isoformat(timespec="seconds")
    layout = RunLayout(arm_dir(spec, seed, arm_name))
    if not layout.root.exists():
        return out
    if layout.heldout_secret.exists():  # the suite's public name: run by run, arms pair only within one suite
        out["heldout_suite"] = read_secret(layout.heldout_secret).fingerprint
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
    state dir says (not run, failed, unfinished)."""
    local = seed_result(spec, arm_name, seed)
    if local.get("status") == "done":
        return local
    return read_arm_piece(out_dir, arm_name, seed) or local


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
        walls = [s["wall_s"] for s in seeds if s.get("status") == "done" and s.get("wall_s") is not None]
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
        "budget": budget_audit(spec, arms),
        "shared": shared,
        "superseded": superseded_records(out),
        "wide": wide_summary(
            out, ref, confidence=confidence, anchor_digests=tuple(str(b.get("sft_digest")) for b in shared.values())
        ),
    }
