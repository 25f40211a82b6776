"""Held-out evaluation: controller / final / test splits, two-level aggregation, manifests, held-out guard.

Public API:

* `bat.evaluate.aggregate`:
  `run_metrics(stages, task, weights, breach=False) -> (agentic, overall)` — per-run Agentic (weights
  renormalised over applicable stages; a missing key = not applicable, `None` = infrastructure-null) and
  Overall = 0.5*Task + 0.5*Agentic, on [0, 1] unrounded;
  `aggregate_runs(runs: list[EvalRun], *, stage_keys, round_index, checkpoint, checkpoint_digest, suite_version,
  harness_version, manifest_digest, confidence=0.95) -> EvalAggregate` — mean of repeats within a track, then the
  mean of track means; t-based half-widths across track means (scipy); a metric with a null cell is `None`, the
  cell is listed and `routable=False`; `pct(x)` / `pct_delta(a, b)` render 0-100 with one decimal.
* `bat.evaluate.compare.paired_compare(a, b, metric="overall") -> PairedComparison` — per-track deltas b - a,
  mean, t half-width, one-sample t-test p-value on the deltas.
* `bat.phase.guard`: `heldout_guard(layout, phase)` context manager (process-wide audit hook) raising
  `HeldoutAccessError` on open/listdir/scandir/... under `layout.heldout_dir`, and again at exit if a violation
  was swallowed; `guard_phase(ctx)` = that guard unless `ctx.phase` is in `evaluate.heldout_phases`
  (default `evaluate`, `final_test`). The phase runner should wrap every phase call in `with guard_phase(ctx):`.
* `bat.evaluate.runner.evaluate_split(cfg, layout, round, split, checkpoint, driver, *, config_hash,
  phase="evaluate") -> (EvalAggregate, written_paths)` — plays the suite's runs (resumes from
  `heldout/round_NN/<split>/partial.jsonl`, re-runs null runs `evaluate.null_retries` times), writes raw runs +
  manifest on the held-out side and the aggregate to `round_NN/<phase>/aggregate_<split>.json`. With
  `benchmark.kind = external` the benchmark's external-evaluator adapter scores the checkpoint instead.
* `bat.evaluate.episodes`: `policy_driver(cfg, checkpoint) -> (driver, close)` (rollout engine + agent loop,
  batched `evaluate.parallel_runs` at a time, `rollout.budgets`), `scripted_driver(agent)` (benchmark agents;
  checkpoint label `scripted:<agent>`).
* `bat.evaluate.store`: `load_aggregate(layout, round, split="controller", phase="evaluate")`, `aggregate_path`,
  `write_aggregate`, `write_heldout`, `read_heldout_runs` (evaluation phases only).
* `bat.evaluate.manifest`: `checkpoint_digest(path)`, `build_manifest(...) -> EvalManifest`, `manifest_digest(m)`.
* Phase functions (`bat.evaluate.phase`): `run_evaluate(ctx)` — controller split on the
  round's checkpoint (round 0: `sft` DONE.json extra `candidate|checkpoint|export|export_dir`; round r: the same
  keys of `grpo`'s DONE.json), plus the final split per `evaluate.final_eval`; `run_final_test(ctx)` — final + untouched test split on `checkpoints/best.json`, once per run.
* The held-out stage probe: `bat.evaluate.stage_probe.build_probe(cfg, layout) -> (ProbeManifest, built)` (once
  per run: the expert on held-out instances of the probe's own split, replayed to one state per stage under
  `heldout/stage_probe/`); `bat.evaluate.stage_probe_expert.score_checkpoint(cfg, layout, checkpoint, label)` /
  `score_expert(...)` -> `StageProbeScore` (K rollouts per state, stage exit, training verifier; per-stage mean x100
  with a t interval over state means, written to `stage_probe/<label>.json`); `bat evaluate probe`.
* CLI: `bat evaluate run --agent expert | --checkpoint DIR [--round N] [--split controller|final]`,
  `bat evaluate compare A B [--metric overall|task|agentic|S3]`. Bench: `bat bench evaluate`.

Record types live in `bat.schemas.evaluation` (EvalRun, NullCell, TrackAggregate, EvalAggregate, RunEntry,
EvalManifest, PairedComparison). Scores are stored on [0, 1] unrounded; reports render x100 with one decimal.
"""
