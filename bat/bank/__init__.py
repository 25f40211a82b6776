"""Stage Bank: data factory over fictional practice tasks -> SFT slices, stage sandbox states, E2E surrogates.

Public API (team "bank"; record types in `bat.schemas.bank`):

Files of one immutable bank version `RunLayout.bank(v)` = `state/<run>/bank/vNNNN/`::

    MANIFEST.json             BankManifest: counts per stage x track x outcome, file digests,
                              generator versions, seeds, reduction grid version, config fingerprint
    tasks.jsonl               PracticeTask: one per fictional task (id, track, seed, reduction lambda)
    trajectories.jsonl        Trajectory: checked teacher runs (train side only; feeds SFT, never RL rows)
    sft/train.jsonl           SftRow (messages = context in chat form, target = one assistant response)
    sft/validation.jsonl      SftRow, split grouped by trajectory_id
    sft/rejected.json         {"overlong": n, "by_stage": {...}, "limit": L, "unit": "tokens"|"chars"}
    rl/rows.jsonl             BankRow z = (p, s, c, G, kappa, m) with a stable `state_id`
    rl/index.json             BankIndex: state_ids by track / stage / outcome / reward_source
    states/<state_id>/        state package p (files/ + STATE.json with per-file sha256 and tree digest)
    leakage.json, ADMITTED    written by team "leakage" (scan); rounds pin the newest ADMITTED version

Functions others call:

* `bat.bank.store.open_bank(layout, version=None) -> BankVersion` (newest admitted when None;
  raises listing the versions on disk). `BankVersion.rows() -> list[BankRow]`,
  `.sft_rows(split) -> list[SftRow]`, `.index() -> BankIndex`, `.manifest() -> BankManifest`,
  `.state_dir(state_id) -> Path`, `.row(state_id) -> BankRow`.
* `bat.bank.pools.pool_rows(index_or_bank, pool, target_stage) -> list[str]` state_ids of the
  views S-target (s == target), S-mix (other S stages), E2E (s == "E2E"); pools in `POOLS`.
* `bat.bank.states.materialize(state_dir, dest) -> Path` copies a state package into a fresh
  workspace after checking every file digest (raises StateDigestError on mismatch);
  `pack_workspace(workspace, dest, metadata) -> StatePackage`; `tree_digest(dir) -> str`.
  (Delegates to `bat.sandbox` state packages once that API exists.)
* `bat.bank.sft.slice_trajectory(traj, ...) -> list[SftRow]` (Eq. 9) and
  `bat.bank.sft.tokenize_sft_row(row, tokenizer) -> (input_ids, loss_mask)`: loss_mask is 1 exactly
  on the tokens of the target response (rendered by the tokenizer's chat template), 0 elsewhere.
* `bat.bank.phase.run_synthesize(ctx: PhaseContext) -> PhaseResult` (phase "synthesize").
* CLI: `bat bank synthesize [--state DIR] [--config FILE]`, `bat bank show [--version N]`.

Starting a rollout from a BankRow (rollout/verify teams): materialise `row.state` into a fresh
workspace, rebuild the practice instance from `row.task` (seed -> same instance, grader side
regenerated outside the workspace), open the benchmark environment positioned at `row.stage`
(`row.start_stage`; E2E starts before S1), show the policy `row.prompt` (task brief + stage
skill kappa + a hand-off note built from upstream *observations* only), and score with rubric
items `row.rubric` (c) and evidence requirements `row.evidence` (G). RL rows never carry an
assistant completion, answer or transcript.

Tool-call text format of assistant turns: `<tool_call>{"name": "...", "arguments": {...}}</tool_call>`.
"""
