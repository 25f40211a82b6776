"""Rubric verifier: binary item verdicts x evidence completeness -> reward (Eq. 4), optional LLM judge.

Public API (record types in `bat.schemas.rollout`):

* Phase function `bat.verify.phase.run_verify(ctx) -> PhaseResult` (alias `verify`, phase "verify").
  Reads the finished rollout shards of the round, `plan.json` (reward_mode `rubric` | `final`, bank version)
  and the bank rows; writes ``round_NN/verify/shard_NNNN/{rewards.jsonl, DONE.json}`` (one RewardRecord per
  rollout, same order), shard by shard, resumable.
  ``bat.verify.shards.read_rewards(phase_dir) -> list[RewardRecord]`` reads every finished shard.
* GRPO contract (RewardRecord): ``rollout_id``, ``state_id``, ``reward`` (float, or None when invalid),
  ``eta``, ``items`` (ItemVerdict: item_id, verdict bool|None, source grader|judge|proxy), ``valid``,
  ``invalid_reason``, ``reward_version``, ``judge`` (``model@endpoint`` or ``none``), ``dropped_files``.
* How a reward is made (`bat.verify.verifier.Verifier.verify`): the rollout's final workspace is reduced to a
  trusted view (`bat.verify.evidence.trusted_view`: only files the reset or a recorded tool call produced,
  unchanged since, tool-owned paths only from their tool), graded by the benchmark's own
  ``bat.benchmark.grader.grade`` on a grader dir regenerated from the practice seed, with the row's prefix
  records; stage rows r = eta * mean(v) over the row's items (``bat.verify.reward.stage_reward``), E2E rows
  ``e2e_reward`` = w * weighted stage mean (eta_s * stage score) + (1 - w) * task; `final` mode (the grpo arm) =
  the Task score (`verify.final_reward: task`) or Overall.
  Breach -> 0. Any null verdict -> reward None, valid False (never a silent 0).
* Judge ``bat.benchmark.judge_client.JudgeClient(JudgeConfig)``: ``judge(items, context) -> JudgeResult`` over an
  OpenAI-compatible /v1/chat/completions; strict ``{"verdicts": {id: bool}}`` with exactly the requested ids;
  timeout / HTTP error / garbage / wrong ids -> bounded retries -> every item None.
* CLI: ``bat verify --round N [--state DIR]``.
"""
