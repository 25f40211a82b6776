"""Promotion gate: a candidate replaces the retained best only if every configured threshold holds.

All values are drops (best - candidate) on the [0, 1] scale from unrounded aggregates; a drop equal to its bound
holds (compared with a 1e-9 tolerance so 0.50 - 0.49 counts as 0.01).
"""

from __future__ import annotations

import math

from bat.config.curriculum import GateConfig
from bat.schemas.routing import GateCheck, GateResult, ScoreSnapshot, TrainingHealth

EPS = 1e-9


def _le(name: str, value: float, bound: float, detail: str = "") -> GateCheck:
    return GateCheck(name=name, value=value, threshold=bound, passed=value <= bound + EPS, detail=detail)


def _all_drops(cand: ScoreSnapshot, best: ScoreSnapshot) -> dict[str, float]:
    drops = {m: getattr(best, m) - getattr(cand, m) for m in ("overall", "task", "agentic")}
    drops.update({f"stage:{k}": best.stages[k] - cand.stages[k] for k in best.stages if k in cand.stages})
    drops.update({f"track:{t}": best.tracks[t] - cand.tracks[t] for t in best.tracks if t in cand.tracks})
    return drops


def health_check(health: TrainingHealth | None, cfg: GateConfig) -> GateCheck:
    """Training healthy: finite metrics and aborted/total rollouts <= max_abort_fraction."""
    if health is None:
        return GateCheck(
            name="training_health",
            value=None,
            threshold=cfg.max_abort_fraction,
            passed=True,
            detail="no training in this round",
        )
    fraction = health.aborted / health.total if health.total else 0.0
    ok = health.metrics_finite and math.isfinite(fraction) and fraction <= cfg.max_abort_fraction + EPS
    detail = f"metrics_finite={health.metrics_finite} aborted={health.aborted}/{health.total}"
    return GateCheck(name="training_health", value=fraction, threshold=cfg.max_abort_fraction, passed=ok, detail=detail)


def evaluate_gate(
    candidate: ScoreSnapshot, best: ScoreSnapshot, health: TrainingHealth | None, cfg: GateConfig
) -> GateResult:
    """Every check of the reference gate, each recorded with its measured value and bound."""
    checks = [
        _le("overall_drop", best.overall - candidate.overall, cfg.max_overall_drop),
        _le("task_drop", best.task - candidate.task, cfg.max_task_drop),
    ]
    missing = sorted(set(best.tracks) - set(candidate.tracks))
    if missing:
        checks.append(
            GateCheck(
                name="track_drop",
                value=None,
                threshold=cfg.max_track_drop,
                passed=False,
                detail=f"candidate lacks tracks {missing}",
            )
        )
    elif best.tracks:
        worst = max(sorted(best.tracks), key=lambda t: best.tracks[t] - candidate.tracks[t])
        checks.append(
            _le("track_drop", best.tracks[worst] - candidate.tracks[worst], cfg.max_track_drop, f"worst track {worst}")
        )
    for stage in cfg.late_stages:
        if stage in best.stages and stage in candidate.stages:
            checks.append(
                _le(f"late_stage_drop:{stage}", best.stages[stage] - candidate.stages[stage], cfg.max_late_stage_drop)
            )
    drops = _all_drops(candidate, best)
    worst_name = max(drops, key=lambda k: drops[k])
    worst = drops[worst_name]
    checks.append(
        GateCheck(
            name="catastrophic",
            value=worst,
            threshold=cfg.catastrophic_drop,
            passed=worst < cfg.catastrophic_drop - EPS,
            detail=f"largest drop {worst_name}",
        )
    )
    checks.append(health_check(health, cfg))
    return GateResult(passed=all(c.passed for c in checks), checks=checks)
