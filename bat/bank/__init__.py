"""Stage Bank: data factory over fictional practice tasks -> SFT slices, stage sandbox states, E2E surrogates.

Public API (record types in `bat.schemas.bank`; knobs in `bat.config.bank.BankConfig`, section `bank`).

Files of one immutable bank version `RunLayout.bank(v)` = `state/<run>/bank/vNNNN/`::

    MANIFEST.json             BankManifest: counts (rl: stage x track x outcome, sft, e2e, trajectories),
                              sha256 of every file, generator versions, seeds, reduction grid, fingerprint
    tasks.jsonl               PracticeTask: one per fictional task (practice seed, teacher variant, reduction)
    trajectories.jsonl        Trajectory: teacher runs with check verdicts (train side only; feeds SFT, never RL)
    sft/train.jsonl           SftRow: messages = context in chat form, target = exactly one teacher response
    sft/validation.jsonl      SftRow; the split is grouped by trajectory_id
    sft/rejected.json         slicing counts: kept / overlong (by stage), limit and unit (tokens | approx_tokens)
    rl/rows.jsonl             BankRow z = (p, s, c, G, kappa, m) with a stable `state_id` (GRPO group key)
    rl/index.json             BankIndex: state_ids by track / stage / outcome / reward_source
    e2e_acceptance.json       Eq. 15 verdict per E2E candidate (boot, fits H, stage checks, validate, leak)
    skills.json               stage skill texts (kappa) of the rows when some are not static (`bank.skills`, set by the
                              LLM skill writer `bat.bank.skill_writer`); scanned by the leakage preflight like any file
    states/<state_id>/        state package p in the sandbox format (`files/` + `package.json`, see
                              `bat.sandbox.package`) + `prior_records.jsonl` (the replayed prefix's records)
    leakage.json, ADMITTED    written by the leakage preflight (`bat bank scan`); rounds pin the newest ADMITTED version

Functions others call:

* `bat.bank.store.open_bank(layout, version=None, *, admitted_only=True) -> BankVersion` (newest admitted when
  None; BankNotFoundError lists versions on disk). `BankVersion.rows()`, `.row(state_id)`, `.index()`,
  `.sft_rows("train"|"validation")`, `.sft_rejected()`, `.trajectories()`, `.tasks()`, `.manifest()`,
  `.state_dir(state_id)`, `.admitted`, `.verify()` (digests vs manifest).
* `bat.bank.pools.pool_rows(index, pool, target_stage=None, *, tracks=None, outcomes=None) -> list[str]`:
  pools `POOLS` = S-target (s == target), S-mix (other S stages), E2E — views of the index.
* `bat.bank.rows.open_row_env(bank_dir, row, workdir, config) -> StagedEnv` positioned at the row's start:
  fresh digest-checked workspace from the package, grader side rebuilt from `row.task` outside it
  (`bat.bank.practice.write_grader`), prefix records as `prior_records`. Show the policy `row.prompt`
  (system = preamble + skill kappa, user = brief + hand-off note of upstream observations) with the benchmark's
  `TOOL_SPECS`; score stage `row.stage` with `row.rubric` (c) and `row.evidence` (G).
* `bat.bank.sft.tokenize_sft_row(row, tokenizer, tools=None) -> (input_ids, loss_mask)`: mask is 1 exactly on
  the target response (+ its end-of-turn token); tools default to the benchmark's `TOOL_SPECS` (as in rollouts).
* `bat.bank.states`: `pack_workspace`, `materialize`, `verify_package`, `tree_digest`, `prefixed` (over
  `bat.sandbox` packages); `bat.bank.replay.replay_prefix(instance, turns, upto, workdir, config)` (Eq. 11).
* `bat.bank.synthesize.synthesize(config, layout) -> (BankVersion, reused)`; phase function
  `bat.bank.phase:run_synthesize` (aliases `synthesize`, `run`). Same config + seed -> same fingerprint ->
  reused (no-op); byte-identical content for any `bank.workers`; a killed run resumes from per-task markers
  in `bank/.build-<fingerprint>/`; a slot whose teacher trajectory fails its check gets `bank.retries`
  replacement tasks (failed runs stay in trajectories.jsonl with `checked=false` and their reasons).
* `bat.bank.task_writer` (paper §2.1, Data Factory): with `bank.task_writer: llm` an OpenAI-compatible endpoint
  writes each task's parameters (`TaskProposal` -> `PracticeTask.params`; practice seeds only); rejected proposals
  are counted by reason in the manifest's `counts.task_writer`. The default `scripted` draws them from seeds.
* CLI: `bat bank synthesize|show|scan [--config FILE] [--set k=v] [--state DIR] [--version N]`.

Outcome labels and their starting situations: success -> every stage boundary of a clean expert run;
recovery -> the built-in pilot stage right after the failed pilot check (the agent faces the failing check);
failure -> the stages after the uncorrected mistake's stage. E2E -> the fresh reduced task, accepted by Eq. 15.
RL rows never carry an assistant completion, answer or transcript.

A plug-in benchmark (`benchmark.name` other than `builtin`) gets its bank through `bat.staged.interface` only
(`bat.bank.plugin_synth.synthesize_plugin`, called by `synthesize`; `bat.bank.plugin_bank`, `bat.bank.plugin_states`):
practice tasks from `Benchmark.tasks`, its scripted `expert`/`recovery`/`failure` agents as teachers, stage states
as `Environment.snapshot()` after a replayed prefix (recovery: right after the turn the teacher turned back from,
where that stage still fails), E2E surrogates from `Benchmark.surrogate`, rows with the benchmark's own skills,
preamble and criteria. `plugin_states.open_row(bench, bank_dir, row, workdir)` restores a row's state
(`Benchmark.open(task, workdir, state=...)`); the built-in benchmark's path and bytes are unchanged.
"""
