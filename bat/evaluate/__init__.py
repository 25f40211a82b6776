"""Held-out evaluation: controller / final / test splits, two-level aggregation, manifests, held-out guard.

Public API (team "evaluate/curriculum"):

* `bat.evaluate.aggregate`:
  `run_metrics(stage_scores, task, weights) -> (agentic, overall)` — per-run Agentic (weights renormalised
  over applicable stages; a missing key = not applicable, `None` = infrastructure-null) and Overall = 0.5*Task +
  0.5*Agentic, all on [0, 1] unrounded;
  `aggregate_runs(runs: list[EvalRun], *, stage_keys, confidence=0.95, ...) -> EvalAggregate` — mean of repeats
  within a track, then mean of track means; t-based half-widths across track means; null cells listed (a metric
  with a null cell is `None`, `routable=False`).
* `bat.evaluate.compare.paired_compare(a: EvalAggregate, b: EvalAggregate, metric="overall") -> PairedComparison`
  — per-track paired deltas (b - a), mean, t half-width, scipy paired t-test p-value.
* `bat.evaluate.guard`: `heldout_guard(layout, phase)` context manager (sys audit hook) that raises
  `HeldoutAccessError` on any open/listdir under `layout.heldout_dir` while a training phase runs, and again at
  exit if a violation was swallowed; `guard_phase(ctx)` picks the right behaviour for a phase (only the phases in
  `EvaluateConfig.heldout_phases` may read the held-out side).
* `bat.evaluate.manifest`: `checkpoint_digest(path) -> str`, `build_manifest(...) -> EvalManifest`.
* `bat.evaluate.store`: writes aggregates to `round_NN/evaluate/aggregate_<split>.json` (training side) and raw
  per-run records + the full manifest to `RunLayout.heldout_runs(round, split)` (or discards raw records when
  `EvaluateConfig.keep_raw_runs` is false); `load_aggregate(layout, round, split) -> EvalAggregate | None`.
* `bat.evaluate.phase.run_evaluate(ctx) -> PhaseResult` — the `evaluate` phase (controller split every round;
  final split per `EvaluateConfig.final_eval`); `run_final_test(ctx)` — the untouched test split, once, at the
  end of a run, on the best checkpoint.

Record types live in `bat.schemas.evaluation` (EvalRun, TrackAggregate, EvalAggregate, EvalManifest,
PairedComparison). Scores are stored on [0, 1] unrounded; reports render x100 with one decimal.
"""
