"""Arm comparison experiment: base / SFT / GRPO / BiCuRL / drop-one-pool ablations x seeds.

`bat experiment --config configs/experiments/FILE.yaml [--only ARM ...] [--seeds 1,2] [--out DIR]`

How it runs (local executor by default; Slurm unchanged through the ordinary driver):

1. Per seed, ONE shared bootstrap state `<state>/seed_<s>/shared/` runs round 0's synthesize -> scan -> sft ->
   evaluate through `bat.orchestrate.driver.run` (run.rounds=0, run.seed=s).
2. Every trained arm gets its own state dir `<state>/seed_<s>/<arm>/`, seeded with a copy of the shared round-0
   products (bank, models, SFT checkpoint, round_00 synthesize/scan/sft/evaluate, held-out round 0) but NOT the
   round-0 route (arm-dependent); the driver then re-runs route and rounds 1..R with the arm's config.
   Budgets are matched: every arm shares rounds, batch size, batches per round, k, GRPO steps.
3. The end-of-run evaluation is the `final_test` phase (final split, plus the test split when
   `evaluate.test_split`) on the retained best checkpoint (`checkpoints/best.json`), run through
   `bat.orchestrate.runner.run_phase` with the phase added to the table. The `base` arm (untrained model)
   runs the phase function `bat.experiment.base_eval:final_test_base` instead (final/test on `models/tiny`).
   Routing only ever reads controller aggregates; nothing is tuned on the final or test split.
4. `collect` reads only training-side files (aggregates, DONE.json counts, arm records) and writes
   `<out>/results.json`, `<out>/README.md` and per-arm curve PNGs.

Public API:

* `bat.experiment.spec.ExperimentSpec` (pydantic; fields: name, base_config, overrides, seeds, arms, state_dir,
  out_dir, report_split), `ArmSpec` (name, kind `base|trained`, overrides),
  `load_experiment(path) -> ExperimentSpec` (clear errors listing valid keys/arms),
  `arm_config(spec, arm, seed) -> BatConfig`, `shared_config(spec, seed) -> BatConfig`.
* `bat.experiment.share.run_shared(spec, seed) -> SharedInfo`, `seed_arm_state(shared: RunLayout, arm: RunLayout)`,
  `sft_digest(layout) -> str`.
* Records: every record the experiment writes or reads is a typed model (`bat.schemas.experiment`: `ArmRecord`,
  `AttemptRecord`, `SeedMarker`, `SharedRecord`, `SeedRun` (a collected arm x seed and its committed piece),
  `WideRecord`, `NullCalibration`; `bat.schemas.experiment_results`: `ExperimentResults` and its parts), read and
  written through `bat.experiment.records` (`load_record`, `read_record`, `write_record`) at paths from
  `bat.state.experiment_layout` (`ExperimentStateLayout`, `ExperimentRunFiles`, `ResultsLayout`).
* `bat.experiment.execute.run_arm(spec, arm, seed, shared) -> ArmRecord` (writes `<arm state>/experiment_arm.json`;
  `experiment_attempt.json` while an attempt is open), `stopped_attempts(root) -> (count, wall_s)` (attempts
  stopped from outside, counted in the next record), `open_attempt(root) -> AttemptRecord | None` (collect's
  `unfinished`).
* `bat.experiment.collect.collect(spec) -> ExperimentResults` (the results.json content: per-arm `summary` per split
  with mean, half_width, seed_sd/min/max, track_means; per-seed runs with rollouts, grpo_steps, plan rows, curve,
  digests; `comparisons` vs the reference arm; `budget` audit), `bat.experiment.write.stamp(results, command) ->
  ExperimentResults`, `bat.experiment.write.write_results(spec, results, out_dir=None) -> [results.json, curves.png,
  stages.png, README.md]`. The README's tables: `write` (headline, budget, closing note), `runs_report` (every run,
  signal per pool, superseded), `stage_report` (stage means, the other held-out split, staircase, stage profiles
  before/after RL), `markdown` (shared cells).
* `bat.experiment.run.run_experiment(spec, *, only=None, seeds=None, command="", out_dir=None, collect_only=False)
  -> ExperimentResults` (what `bat experiment` calls; a failed arm or seed is recorded and the rest still run).
* `python -m bat.experiment.power --arm NAME=DIR[,DIR] ...`: reporting by hand on the held-out side, never called by
  a phase or by `collect`: arms paired over end-of-run runs (same instance and sampling seed), the smallest gap
  the split's run count detects and the runs a given gap needs.
* `bat experiment --config FILE --wide-final N` (`bat.experiment.wide.run_wide`): the finished arm x seeds' retained
  checkpoints re-scored on N final runs per track (the end-of-run runs reused: run r of a track is keyed by (split,
  track, r)); per-run scores recorded under `<out>/wide/`, with each disk's held-out suite anchored by the shared
  SFT's score on it (`bat.experiment.anchor`), summarised against the reference arm (`bat.experiment.wide_summary`)
  and shown in the report (`bat.experiment.wide_report`). Reporting only: the final split never feeds routing or
  tuning.
* `bat experiment --config FILE --null-control SEEDS --null-kl KL` (`bat.experiment.null_control`): the shared SFT
  moved along seeded random directions to KL from it, scored on the same wide final runs (arm `_null-kl<KL>` of the wide
  summary, with each arm's gain beyond the null's): what a change of that size scores without learning.
* An arm-versus-twin study (`twin_dir` of the experiment file; `bat.experiment.twin_design.twin_design`):
  `bat experiment --config FILE --sft-final` (`bat.experiment.sft_final`: the shared SFT on the arms' end-of-run
  final runs), `--twin-unit train|e2e|reference` (`bat.experiment.twin_units`: finished units recorded from their
  state dirs as committed `TwinPiece`s under `<twin_dir>/units/`) and `--twin-report` (`bat.experiment.twin_report`:
  the pre-registered analysis `bat.experiment.twin_analysis` of the committed pieces -> `results.json`, and
  `bat.experiment.twin_plot` -> `curves.png`).

Matched budget: arm overrides may only touch `curriculum.*` (not batch_size/batches_per_round/exhausted); the
results' `budget` audit checks resolved budget fields and the RL arms' rollout/GRPO-step counts, and names arms whose
round plans repeated rows (a pool smaller than a round: enlarge the bank, e.g. `bank.e2e_per_track`).
"""
