"""Outer loop of BiCuRL: router, mixture sampler, promotion gate, fallback, best-checkpoint tracking, domain shift.

Public API:

* `bat.curriculum.router.route_target(scores, stage_keys, *, gate_held=False, reference=None) -> (stage, rule)` —
  target = lowest stage; after a held gate, the stage with the largest positive regression vs `reference`
  (the retained best), else the lowest; ties go to the earliest stage.
* `bat.curriculum.mixture.pool_counts(pools, rho, batch_size) -> dict[pool, int]` — exact per-batch composition
  (default 4 S-target / 2 S-mix / 2 E2E; pool names as `bat.bank.pools.POOLS`), renormalised (largest
  remainder) over the enabled pools; `sample_round(pool_ids, counts, batches, seed, exhausted="cycle")
  -> (batches of (pool, state_id), passes)` — seeded permutations consumed without replacement inside a round,
  a fresh permutation per round (seed derives from the round).
* `bat.curriculum.gate.evaluate_gate(candidate: ScoreSnapshot, best: ScoreSnapshot, health, cfg.gate)
  -> GateResult` — overall/task/per-track/late-stage/catastrophic/training-health checks, each recorded with
  value and bound (drops on [0, 1]; a drop equal to its bound holds).
* `bat.curriculum.fallback.next_drop_counter(counter, overall, previous_overall)`,
  `fallback_reason(counter, kl, cfg.fallback) -> str | None`.
* `bat.curriculum.kl.measure_kl(ctx, candidate, best) -> float | None` — mean per-token KL(candidate || best) via
  `bat.train.kl_estimate.estimate_kl` on the bank rows held back as probes (`plan.kl_probe_ids`).
* `bat.curriculum.shift.detect_domain_shift(prev, cur, cfg) -> DomainShift`.
* `bat.curriculum.lr_probe.probe_round(cfg, layout, round, scales, out) -> rows` — what a finished one-step GRPO
  round would have written at `scale x lr` (start + scale x step: exact for Adam's first step from a fresh
  optimizer), each candidate's KL to the start on the KL probe rows and its controller evaluation, under `out`
  only (`bat train lr-probe`).
* `bat.curriculum.decide.decide(...) -> (RouteDecision, BestCheckpoint)` — the auditable decision (inputs = aggregates only,
  rule fired, target stage, mixture, start checkpoint, best checkpoint, drop counter, KL, gate checks).
* `bat.curriculum.arms.resolve_arm(cfg) -> ArmSpec` — baseline arms as config: `sft` (no RL rounds), `grpo`
  (E2E pool only, single final reward), `bicurl` (any subset of pools).
* `bat.curriculum.phase.run_route(ctx) -> PhaseResult` — the `route` phase: reads `round_NN/evaluate/aggregate_*`
  (never the held-out side), writes `round_NN/route/decision.json`, `checkpoints/best.json` and
  `round_{NN+1}/plan.json` (`RoundPlan`), then the round report. It returns `extra["next_round"]`: the round to
  queue next, or None when the run stops here (round budget reached, arm `sft`). It runs under the held-out
  guard itself. A controller evaluation with null cells makes it raise `NullCellsError` (after logging STOP):
  re-run `evaluate` to repair, then `route` again.

Record types live in `bat.schemas.routing` (GateCheck, GateResult, RouteDecision, RoundPlan, BestCheckpoint).
"""
