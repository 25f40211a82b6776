"""Next round's plan from the decision: pinned bank version, KL probe rows held back, exact mixture batches."""

from __future__ import annotations

from collections.abc import Sequence

from bat.config.curriculum import CurriculumConfig
from bat.curriculum.arms import ArmSpec
from bat.curriculum.mixture import sample_round
from bat.schemas.routing import PlanRow, RoundPlan, RouteDecision
from bat.seeds import derive_seed


def kl_probe_ids(state_ids: Sequence[str], cfg: CurriculumConfig, run_seed: int) -> list[str]:
    """A fixed set of rows held out from training as KL(candidate || best) probes.

    Rows are ranked by a seeded hash of their state_id, so a row keeps its rank across bank versions; at most
    `fallback.kl_prompts` rows and at most `fallback.kl_max_fraction` of the bank are held back.
    """
    if not cfg.fallback.kl_enabled or not state_ids:
        return []
    n = min(cfg.fallback.kl_prompts, int(len(state_ids) * cfg.fallback.kl_max_fraction))
    ranked = sorted(state_ids, key=lambda sid: (derive_seed(run_seed, "kl-probe", sid), sid))
    return sorted(ranked[:n])


def pool_ids_for(index, pools: Sequence[str], target_stage: str | None, exclude: set[str]) -> dict[str, list[str]]:
    """State ids of each enabled pool (bank views), minus the KL probe rows."""
    from bat.bank.pools import pool_rows

    out: dict[str, list[str]] = {}
    for pool in pools:
        ids = pool_rows(index, pool, target_stage if pool != "E2E" else None)
        out[pool] = [sid for sid in ids if sid not in exclude]
    return out


def focus_on_shifted_tracks(
    pool_ids: dict[str, list[str]], decision: RouteDecision, cfg: CurriculumConfig, index
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """The domain-shift response `focus` (`curriculum.shift_response`; paper Fig. 1 names the Domain-Shift Detector,
    not a response): each pool keeps only rows of the shifted tracks when those hold at least the rows the pool
    draws in a round (its mixture count x batches per round); returns the pool ids and, per focused pool, the tracks
    it was narrowed to."""
    shift = decision.domain_shift
    if cfg.shift_response != "focus" or shift is None or not shift.detected or not shift.shifted_tracks:
        return pool_ids, {}
    tracks = list(shift.shifted_tracks)
    wanted = {sid for t in tracks for sid in index.by_track.get(t, [])}
    out, focused = dict(pool_ids), {}
    for pool, ids in pool_ids.items():
        narrowed = [sid for sid in ids if sid in wanted]
        if len(narrowed) >= decision.mixture.get(pool, 0) * cfg.batches_per_round and narrowed:
            out[pool], focused[pool] = narrowed, tracks
    return out, focused


def build_plan(
    decision: RouteDecision,
    arm: ArmSpec,
    cfg: CurriculumConfig,
    *,
    index,
    stage_of: dict[str, str],
    bank_version: int | None,
    run_seed: int,
) -> RoundPlan:
    """Sample the next round's batches (seeded by (run seed, next round, "plan")) and assemble `RoundPlan`."""
    if decision.next_round is None or decision.start_checkpoint is None:
        raise ValueError(f"round {decision.round} decision ({decision.action}) schedules no next round")
    probes = set(kl_probe_ids(sorted(stage_of), cfg, run_seed))
    pool_ids = pool_ids_for(index, list(decision.mixture), decision.target_stage, probes)
    pool_ids, focused = focus_on_shifted_tracks(pool_ids, decision, cfg, index)
    seed = derive_seed(run_seed, decision.next_round, "plan")
    batches, passes = sample_round(pool_ids, decision.mixture, cfg.batches_per_round, seed, exhausted=cfg.exhausted)
    rows = [[PlanRow(state_id=sid, pool=pool, stage=stage_of[sid]) for pool, sid in batch] for batch in batches]  # type: ignore[arg-type]
    return RoundPlan(
        round=decision.next_round,
        arm=arm.arm,
        target_stage=decision.target_stage,
        mixture=dict(decision.mixture),
        reward_mode=arm.reward_mode,  # type: ignore[arg-type]
        bank_version=bank_version,
        start_checkpoint=decision.start_checkpoint,
        seed=seed,
        batches=rows,
        excluded_state_ids=len(probes),
        passes=passes,
        focus_tracks=focused,
    )
