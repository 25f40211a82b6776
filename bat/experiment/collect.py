"""Gather per-arm results from training-side files only: end-of-run aggregates, controller curves, counts, wall.

Reads, per arm x seed state dir (or, where that dir holds no finished run, the arm x seed's committed record under
`<out_dir>/runs/`, `bat.experiment.pieces`): `experiment_arm.json`, `round_NN/final_test/aggregate_<split>.json`,
`round_NN/evaluate/aggregate_controller.json`, `round_NN/route/best.json`, `round_NN/route/decision.json` (the
action and KL of each RL round), DONE.json counts (and the runner's `compute_s`), the grpo phase's
`round_NN/grpo/metrics.jsonl` (the last step's gradient norm and uncancelled advantage share), the training rewards
of `round_NN/verify/` (mean reward and identical GRPO groups per pool), the round plans (rows) and `run.json` (the
matched-budget fields the run actually ran under). Returns typed results (`bat.schemas.experiment_results`); writes
nothing. A trained arm x seed that ran under other budget fields than the experiment file now resolves to is
`stale` (`bat.experiment.budget_audit`): listed, never averaged (supersede it to rerun). The statistics across
seeds and tracks are `bat.experiment.summary`'s.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

from bat.benchmark.secret import read_secret
from bat.config.load import ConfigError
from bat.config.run_record import recorded_config
from bat.curriculum.arms import resolve_arm
from bat.curriculum.history import load_best_after, load_decision
from bat.curriculum.lr_probe import training_steps
from bat.evaluate.store import load_aggregate
from bat.experiment.budget_audit import budget_audit, expected_budget, mark_stale
from bat.experiment.execute import FINAL_PHASE, open_attempt, read_arm_record
from bat.experiment.pieces import read_arm_piece, read_shared_piece, superseded_records
from bat.experiment.records import read_record
from bat.experiment.share import ROUND0_PHASES, arm_dir, shared_dir
from bat.experiment.spec import ExperimentSpec, arm_config, bootstrap_seed_of, budget_signature
from bat.experiment.summary import END_SPLITS, arm_summary, compare, held_out_profile
from bat.experiment.wide_summary import wide_summary
from bat.phase.plan import read_plan
from bat.schemas.evaluation import EvalAggregate
from bat.schemas.experiment import Curve, GroupRewards, PoolSignal, RoundSignal, RunCounts, SeedRun, SharedRecord
from bat.schemas.experiment_results import ArmResult, ArmSummary, ExperimentResults
from bat.state.errors import StateFileError
from bat.state.experiment_layout import ExperimentRunFiles
from bat.state.layout import RunLayout
from bat.state.markers import read_done
from bat.verify.shards import read_rewards
from bat.verify.signal import pool_signal


def _counts(layout: RunLayout) -> RunCounts:
    """The arm's `RunCounts`: DONE.json counts and the runner's `compute_s`, each RL round's signal (mean training
    reward, GRPO groups and how many had identical rewards, the last GRPO step's gradient norm before clipping and
    uncancelled advantage share from the grpo phase's metrics, the route's action and KL, per-pool and per-group
    rewards: what `bat.verify.signal_report` reads, kept with the piece once the state dir is gone), and the plans'
    row counts. Only rounds with finished rewards get a signal entry."""
    counts = RunCounts()
    signal: dict[int, RoundSignal] = {}
    compute = 0.0
    for r in layout.rounds():
        for phase_dir in sorted(p for p in layout.round_dir(r).iterdir() if p.is_dir()):
            done = read_done(phase_dir)
            if done is None or (r == 0 and phase_dir.name in ROUND0_PHASES):
                continue
            compute += float(done.extra.get("compute_s", 0.0))  # the runner's own time of every phase
            entry = signal.setdefault(r, RoundSignal(round=r))
            if phase_dir.name == "rollout":
                counts.rollouts += int(done.counts.get("rollouts", 0))
                counts.generated_tokens += int(done.counts.get("generated_tokens", 0))
            if phase_dir.name == "verify" and r > 0:
                entry.reward_mean = done.counts.get("reward_mean")
                entry.rewards = done.counts.get("rewards")
                entry.by_pool = {k: PoolSignal(**v) for k, v in pool_signal(read_rewards(phase_dir)).items()}
            if phase_dir.name == "grpo":
                counts.grpo_steps += int(done.counts.get("step", 0))
                counts.rl_rounds += 1
                steps = training_steps(layout, r, "grpo")
                last = steps[-1] if steps else None
                entry.groups = done.counts.get("groups")
                entry.groups_identical = done.counts.get("groups_identical_rewards")
                entry.grad_norm = last.grad_norm if last else None
                entry.adv_uncancelled = last.adv_uncancelled if last else None
            if phase_dir.name == "route" and r > 0:
                decision = load_decision(layout, r)
                if decision is not None:
                    entry.route, entry.kl = decision.action, decision.kl
    for r, groups in _group_rewards(layout).items():
        if r in signal:
            signal[r].group_rewards = groups
    counts.compute_s = round(compute, 3)
    counts.signal = [signal[r] for r in sorted(signal) if "reward_mean" in signal[r].model_fields_set]
    for r in layout.rounds():
        if r >= 1 and layout.plan(r).exists():
            ids = [row.state_id for batch in read_plan(layout.plan(r)).batches for row in batch]
            counts.plan_rows, counts.plan_unique_rows = (
                counts.plan_rows + len(ids),
                counts.plan_unique_rows + len(set(ids)),
            )
    return counts


def _group_rewards(layout: RunLayout) -> dict[int, list[GroupRewards]]:
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
            GroupRewards(state_id=state_id, pool=pool, outcome=label, rewards=[round(v, 4) for v in values])
            for pool, state_id, label, values in groups
        ]
        for index, groups in rounds.items()
    }


def _curve(layout: RunLayout) -> Curve:
    """Per round: controller Overall (raw), the retained best's controller score after that round, and the round's
    controller stage scores (stage key -> 0-1 or None)."""
    curve = Curve(rounds=[], raw=[], best=[], stages=[])
    for r in layout.rounds():
        agg = load_aggregate(layout, r, "controller")
        after = load_best_after(layout, r)
        if agg is None or after is None:
            continue
        curve.rounds.append(r)
        curve.raw.append(agg.overall)
        curve.best.append(after.score)
        curve.stages.append(dict(agg.stages))
    return curve


def _run_budget(layout: RunLayout) -> dict | None:
    """The matched-budget fields (`budget_signature`) of the config the run ran under (its `run.json`), or None when
    it has no readable one."""
    try:
        cfg = recorded_config(layout)
    except (ConfigError, StateFileError, KeyError, TypeError):
        return None
    return None if cfg is None else budget_signature(cfg)


def _whole(agg: EvalAggregate) -> EvalAggregate:
    """`agg` with every field set (written in full, defaults included)."""
    return EvalAggregate.model_validate(agg.model_dump(mode="json"))


def seed_result(spec: ExperimentSpec, arm_name: str, seed: int) -> SeedRun:
    """Everything about one arm x seed read from its state dir (status, end-of-run aggregate, curve, counts, shared
    SFT digests); `source: state`. Status `unfinished` (with `attempt_started_at`, UTC) when an attempt is open in
    the state dir: running now, or stopped from outside before it could write its record."""
    record = read_arm_record(spec, seed, arm_name)
    attempt = open_attempt(arm_dir(spec, seed, arm_name))
    out = SeedRun(
        seed=seed,
        source="state",
        status="unfinished" if attempt is not None else (record.status if record else "not run"),
        error=record.error if record else None,
        wall_s=record.wall_s if record else None,
        attempts=record.attempts if record else 0,
        interrupted_attempts=record.interrupted_attempts if record else 0,
        shared_sft_digest=record.shared_sft_digest if record else None,
    )
    if attempt is not None:
        started = _dt.datetime.fromtimestamp(attempt.started_at, _dt.timezone.utc)
        out.attempt_started_at = started.isoformat(timespec="seconds")
    layout = RunLayout(arm_dir(spec, seed, arm_name))
    if not layout.root.exists():
        return out
    if layout.heldout_secret.exists():  # the suite's public name: run by run, arms pair only within one suite
        out.heldout_suite = read_secret(layout.heldout_secret).fingerprint
    counts = _counts(layout)
    out = out.model_copy(update={name: getattr(counts, name) for name in RunCounts.model_fields})
    out.budget = _run_budget(layout)
    out.curve = _curve(layout)
    ctrl0 = load_aggregate(layout, 0, "controller")
    best0 = load_best_after(layout, 0)
    out.round0_eval_digest = ctrl0.checkpoint_digest if ctrl0 else None
    out.round1_start_digest = best0.checkpoint_digest if best0 else None
    out.final_round = record.final_round if record else None
    out.aggregates = {}
    for split in END_SPLITS:
        agg = load_aggregate(layout, out.final_round, split, FINAL_PHASE) if out.final_round is not None else None
        if agg is not None:
            out.aggregates[split] = _whole(agg)
    out.aggregate = out.aggregates.get(spec.report_split)
    return out


def merged_seed_result(spec: ExperimentSpec, arm_name: str, seed: int, out_dir: Path) -> SeedRun:
    """The arm x seed from its state dir when that holds a finished run, else its committed record, else what the
    state dir says (not run, failed, unfinished)."""
    local = seed_result(spec, arm_name, seed)
    if local.done:
        return local
    return read_arm_piece(out_dir, arm_name, seed) or local


def _arm_result(spec: ExperimentSpec, arm, out: Path, stage_keys: list[str], confidence: float) -> ArmResult:
    """One arm: every seed (state or committed; stale ones marked), summaries per end-of-run split, mean wall."""
    seeds = [merged_seed_result(spec, arm.name, s, out) for s in spec.seeds]
    if arm.kind == "trained":
        for seed_run in seeds:
            mark_stale(seed_run, expected_budget(arm_config(spec, arm, seed_run.seed)))
    summaries = {}
    for split in END_SPLITS:
        aggs = [s.aggregates[split] for s in seeds if s.done and split in s.aggregates]
        if aggs:
            summaries[split] = arm_summary(aggs, stage_keys, confidence)
    walls = [s.wall_s for s in seeds if s.done and s.wall_s is not None]
    return ArmResult(
        kind=arm.kind,
        rl=arm.kind == "trained" and resolve_arm(arm_config(spec, arm, spec.seeds[0]).curriculum).rl,
        overrides=list(arm.overrides),
        seeds=seeds,
        summary=summaries.get(spec.report_split, arm_summary([], stage_keys, confidence)),
        summaries=summaries,
        wall_s_mean=sum(walls) / len(walls) if walls else None,
        failed=[s.seed for s in seeds if s.status == "failed"],
    )


def _shared(spec: ExperimentSpec, out: Path) -> dict[str, SharedRecord]:
    """Seed -> the record of the bootstrap serving it: this disk's, else the committed one (`source: committed`)."""
    shared = {}
    for seed in spec.seeds:
        local = read_record(ExperimentRunFiles(shared_dir(spec, seed)).shared_record, SharedRecord)
        committed = read_shared_piece(out, bootstrap_seed_of(spec, seed))
        if local is not None:
            shared[str(seed)] = local
        elif committed is not None:
            shared[str(seed)] = committed.model_copy(update={"source": "committed"})
    return shared


def collect(spec: ExperimentSpec, out_dir: Path | None = None) -> ExperimentResults:
    """The content of results.json: per-arm summaries, per-seed runs, comparisons vs the reference (on the report
    split, and per end-of-run split), the held-out stage profile before and after RL, budget audit.

    Arm x seeds finished in earlier pieces come from their committed records under `<out_dir>/runs/` (default
    `spec.out_dir`) where this disk has no finished state for them."""
    out = Path(out_dir or spec.out_dir)
    cfg = arm_config(spec, spec.arms[0], spec.seeds[0])
    stage_keys, confidence = list(cfg.stage_keys), cfg.evaluate.confidence
    arms = {arm.name: _arm_result(spec, arm, out, stage_keys, confidence) for arm in spec.arms}
    ref = spec.reference
    comparisons = {name: compare(arms[ref].summary, a.summary, confidence) for name, a in arms.items() if name != ref}
    comparisons_by_split = {split: _split_comparisons(arms, ref, split, confidence) for split in END_SPLITS}
    shared = _shared(spec, out)
    return ExperimentResults(
        schema_version=1,
        experiment=spec.name,
        base_config=str(spec.base_config),
        overrides=list(spec.overrides),
        seeds=list(spec.seeds),
        bootstrap_seed=spec.bootstrap_seed,
        report_split=spec.report_split,
        stage_keys=stage_keys,
        confidence=confidence,
        reference_arm=ref,
        arms=arms,
        comparisons=comparisons,
        comparisons_by_split=comparisons_by_split,
        held_out_profile=held_out_profile(arms, stage_keys, confidence),
        budget=budget_audit(spec, arms),
        shared=shared,
        superseded=superseded_records(out),
        wide=wide_summary(
            out, ref, confidence=confidence, anchor_digests=tuple(str(b.sft_digest) for b in shared.values())
        ),
    )


def _split_comparisons(arms: dict[str, ArmResult], ref: str, split: str, confidence: float) -> dict:
    """Arm -> reference - arm on `split` (None where either has no summary on it)."""
    base: ArmSummary | None = arms[ref].summaries.get(split)
    return {
        name: (compare(base, arm.summaries[split], confidence) if base is not None and split in arm.summaries else None)
        for name, arm in arms.items()
        if name != ref
    }
