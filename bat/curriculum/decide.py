"""The outer-loop decision as one pure function of aggregate numbers: keep/fallback, best, target, mixture."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bat.config.curriculum import CurriculumConfig
from bat.curriculum.arms import ArmSpec
from bat.curriculum.fallback import fallback_reason, next_drop_counter
from bat.curriculum.gate import evaluate_gate
from bat.curriculum.mixture import pool_counts
from bat.curriculum.router import route_target
from bat.curriculum.shift import detect_domain_shift
from bat.schemas.evaluation import EvalAggregate
from bat.schemas.routing import (
    BestCheckpoint,
    DomainShift,
    GateResult,
    RouteDecision,
    ScoreSnapshot,
    TrainingHealth,
)


class NullCellsError(RuntimeError):
    """The controller evaluation has infrastructure-null cells: routing stops until they are repaired."""


def snapshot(agg: EvalAggregate) -> ScoreSnapshot:
    """The aggregate numbers routing reads; raises NullCellsError when the evaluation is not routable."""
    if not agg.routable or agg.overall is None or agg.task is None or agg.agentic is None:
        cells = ", ".join(f"{c.track}#{c.repeat}:{c.field}" for c in agg.null_cells[:10]) or "aggregate metric missing"
        raise NullCellsError(
            f"round {agg.round} {agg.split} evaluation has {len(agg.null_cells)} null cell(s) ({cells}); "
            "repair them (re-run the evaluate phase) before routing"
        )
    tracks = {t: a.overall for t, a in agg.tracks.items()}
    return ScoreSnapshot(
        round=agg.round,
        checkpoint=agg.checkpoint,
        checkpoint_digest=agg.checkpoint_digest,
        overall=agg.overall,
        task=agg.task,
        agentic=agg.agentic,
        stages={k: v for k, v in agg.stages.items() if v is not None},
        tracks={t: v for t, v in tracks.items() if v is not None},
    )


@dataclass(frozen=True)
class History:
    """What the previous route decision left behind (read from `round_{r-1}/route/decision.json`)."""

    previous_overall: float | None = None
    drop_counter: int = 0
    previous: ScoreSnapshot | None = None


def _promote(best: BestCheckpoint | None, snap: ScoreSnapshot) -> BestCheckpoint:
    history = list(best.history) if best else []
    history.append({"round": snap.round, "checkpoint": snap.checkpoint, "overall": snap.overall})
    return BestCheckpoint(
        round=snap.round,
        checkpoint=snap.checkpoint,
        checkpoint_digest=snap.checkpoint_digest,
        score=snap.overall,
        scores=snap,
        history=history,
    )


def _shift_response(shift: DomainShift, cfg: CurriculumConfig, stop: bool, refresh_steered: bool) -> str | None:
    """The response to a detected shift (paper Fig. 1: the Curriculum Teacher's Domain-Shift Detector and Report for
    next round), as the decision record states it (None when nothing was detected). The bank refresh is named only
    when a steered one runs beside the next round (`refresh_steered`)."""
    if not shift.detected:
        return None
    if cfg.shift_response == "report" or stop or not shift.shifted_tracks:
        why = (
            "curriculum.shift_response=report"
            if cfg.shift_response == "report"
            else ("no next round" if stop else "no single track dropped")
        )
        return f"reported only ({why})"
    response = f"next round draws each pool's rows from {shift.shifted_tracks} where they hold enough rows"
    if refresh_steered:
        response += (
            "; the bank refresh beside it splits its tasks by 1 - track Overall of this evaluation "
            "(bank.refresh_steering), which holds the drop"
        )
    return response


@dataclass(frozen=True)
class _Judgement:
    """What the fallback rule and the promotion gate made of the candidate."""

    action: str
    """bootstrap, promote, hold, fallback or continue."""
    reason: str
    best: BestCheckpoint
    """The retained best after this round (the candidate when promoted)."""
    held: bool
    """The next round restarts from the retained best instead of the candidate."""
    drop_counter: int = 0
    gate: GateResult | None = None


def _judge(
    snap: ScoreSnapshot,
    best: BestCheckpoint | None,
    history: History,
    kl: float | None,
    health: TrainingHealth | None,
    cfg: CurriculumConfig,
) -> _Judgement:
    """Bootstrap the first best; else fall back on a sustained drop or KL blow-up, else apply the gate (promote or
    hold), or with the gate disabled continue from the candidate (promoting it when its Overall is higher)."""
    if best is None:
        return _Judgement(
            "bootstrap", "first evaluated checkpoint becomes the retained best", _promote(None, snap), False
        )
    counter = next_drop_counter(history.drop_counter, snap.overall, history.previous_overall)
    if cfg.retain == "last":
        return _Judgement(
            "continue", "curriculum.retain=last: the candidate is retained", _promote(best, snap), False, counter
        )
    why = fallback_reason(counter, kl, cfg.fallback)
    if why is not None:
        return _Judgement("fallback", why, best, True, 0)
    if cfg.gate.enabled:
        gate = evaluate_gate(snap, best.scores, health, cfg.gate)
        if gate.passed:
            return _Judgement("promote", "every gate check held", _promote(best, snap), False, counter, gate)
        return _Judgement("hold", f"gate failed: {', '.join(gate.failed)}", best, True, counter, gate)
    new_best = _promote(best, snap) if snap.overall > best.scores.overall else best
    return _Judgement("continue", "gate disabled: the candidate seeds the next round", new_best, False, counter)


def _next_target(
    arm: ArmSpec,
    snap: ScoreSnapshot,
    stage_keys: Sequence[str],
    held: bool,
    best: BestCheckpoint | None,
    cfg: CurriculumConfig,
) -> tuple[str | None, str, dict[str, int]]:
    """(target stage, routing rule, rows per pool) of the next round: none for an arm without RL, the single
    pool mixture for an unrouted arm, the configured stage when `cfg.target_stage` pins one, else the router's pick
    against the best's stage scores."""
    if not arm.rl:
        return None, "none", {}
    if not arm.routed:
        return None, "single_pool", pool_counts(arm.pools, cfg.rho, cfg.batch_size)
    if cfg.target_stage is not None:
        if cfg.target_stage not in stage_keys:
            raise ValueError(f"curriculum.target_stage {cfg.target_stage!r} is not a stage; valid: {list(stage_keys)}")
        return cfg.target_stage, "pinned", pool_counts(arm.pools, cfg.rho, cfg.batch_size)
    target, rule = route_target(snap.stages, stage_keys, gate_held=held, reference=best.scores.stages if best else None)
    return target, rule, pool_counts(arm.pools, cfg.rho, cfg.batch_size)


def decide(
    *,
    round_index: int,
    arm: ArmSpec,
    cfg: CurriculumConfig,
    stage_keys: Sequence[str],
    candidate: EvalAggregate,
    best: BestCheckpoint | None,
    history: History,
    kl: float | None = None,
    health: TrainingHealth | None = None,
    last_round: bool = False,
    refresh_steered: bool = False,
) -> tuple[RouteDecision, BestCheckpoint]:
    """Decide the round: bootstrap/promote/hold/fallback/continue, the next target stage and mixture.

    Inputs are aggregate numbers only. Returns the auditable decision and the (possibly new) best checkpoint.
    `refresh_steered`: a bank refresh steered by track weakness runs beside the next round (`orchestrate.bank_refresh`
    and `bank.refresh_steering: weakness`), so a domain-shift response may name it.
    """
    snap = snapshot(candidate)
    shift = detect_domain_shift(history.previous, snap, cfg.shift_track_drop)
    judged = _judge(snap, best, history, kl, health, cfg)
    new_best, held = judged.best, judged.held
    start = new_best.checkpoint if held or judged.action in ("bootstrap", "promote") else snap.checkpoint
    target, rule, mixture = _next_target(arm, snap, stage_keys, held, best, cfg)
    reason = judged.reason if arm.rl else f"{judged.reason}; arm {arm.arm} runs no RL rounds"
    stop = last_round or not arm.rl
    decision = RouteDecision(
        round=round_index,
        arm=arm.arm,
        action=judged.action,  # type: ignore[arg-type]
        reason=reason,
        rule=rule,
        target_stage=target,
        mixture=mixture,
        start_checkpoint=None if stop else start,
        best_checkpoint=new_best.checkpoint,
        candidate=snap,
        best_before=best.scores if best else None,
        previous_overall=history.previous_overall,
        drop_counter=judged.drop_counter,
        kl=kl,
        gate=judged.gate,
        domain_shift=shift,
        shift_response=_shift_response(shift, cfg, stop, refresh_steered),
        health=health,
        next_round=None if stop else round_index + 1,
    )
    return decision, new_best
