"""Outer loop of BiCuRL: router, mixture sampler, promotion gate, fallback, best-checkpoint tracking, domain shift.

Public API (team "evaluate/curriculum"):

* `bat.curriculum.router.route_target(scores, stage_keys, *, gate_held=False, reference=None) -> (stage, rule)` —
  target = lowest stage; after a held gate, the stage with the largest positive regression vs `reference`
  (the retained best), else the lowest; ties go to the earliest stage.
* `bat.curriculum.mixture.pool_counts(cfg) -> dict[pool, int]` — exact per-batch composition (default 4 S-target /
  2 S-mix / 2 E2E), renormalised (largest remainder) over the enabled pools;
  `sample_round(rows, target_stage, counts, batches, seed) -> list[list[row]]` — without replacement inside a
  round, fresh permutation per round.
* `bat.curriculum.gate.evaluate_gate(candidate, best, health, thresholds) -> GateResult` — overall/task/per-track/
  late-stage/catastrophic/training-health checks, each recorded with value and threshold.
* `bat.curriculum.fallback.update_drop_counter(prev, cur_overall, prev_overall)`, `should_fallback(...)`.
* `bat.curriculum.kl.policy_kl(candidate_dir, best_dir, prompts) -> float` — mean per-token KL(candidate||best).
* `bat.curriculum.shift.detect_domain_shift(prev, cur, cfg) -> DomainShift`.
* `bat.curriculum.decide.decide(...) -> RouteDecision` — the auditable decision (inputs = aggregates only,
  rule fired, target stage, mixture, start checkpoint, best checkpoint, drop counter, KL, gate checks).
* `bat.curriculum.arms.resolve_arm(cfg) -> ArmSpec` — baseline arms as config: `sft` (no RL rounds), `grpo`
  (E2E pool only, single final reward), `bicurl` (any subset of pools).
* `bat.curriculum.phase.run_route(ctx) -> PhaseResult` — the `route` phase: reads `round_NN/evaluate/aggregate_*`
  (never the held-out side), writes `round_NN/route/decision.json`, `checkpoints/best.json` and
  `round_{NN+1}/plan.json` (`RoundPlan`), then the round report.

Record types live in `bat.schemas.routing` (GateCheck, GateResult, RouteDecision, RoundPlan, BestCheckpoint).
"""
