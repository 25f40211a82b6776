"""Rubric verifier: binary item verdicts x evidence completeness -> reward (Eq. 4), LLM judge.

Public API (team "rollout/verify"; record types in `bat.schemas.rollout`):

* Phase function `bat.verify.phase.run_verify(ctx: PhaseContext) -> PhaseResult` (phase "verify").
  Reads the rollout shards of the round and the bank rows (rubric items c, evidence G); writes
  ``round_NN/verify/shard_NNNN/rewards.jsonl`` (RewardRecord, one per rollout) + ``DONE.json``.
  ``bat.verify.shards.read_rewards(phase_dir) -> list[RewardRecord]`` reads every finished shard.
* ``bat.verify.reward.stage_reward(verdicts, eta) -> float | None``: r = eta * mean(v); any None
  verdict -> None (the rollout is invalid for training, never a silent 0).
* ``bat.verify.reward.e2e_reward(stage_scores, weights, task_score, stage_weight=0.5)``:
  0.5 * weighted stage mean + 0.5 * task score (task truth from the grader side only).
* ``bat.verify.evidence.evidence_completeness(requirements, tool_records, workspace) -> (eta, detail)``:
  evidence counts only when an execution record produced it (file digest written by a tool call
  and unchanged since), so files the agent writes to mimic evidence do not raise the reward.
* ``bat.verify.judge.JudgeClient(base_url, model, timeout_s, max_retries, api_key_env)``:
  ``judge(items: list[JudgeItem], context: str) -> dict[item_id, bool | None]`` over an
  OpenAI-compatible /v1/chat/completions endpoint; strict JSON with exactly the requested item ids;
  timeout / garbage / wrong ids after bounded retries -> every requested item None.
* Every RewardRecord carries ``reward_version`` and ``judge`` (model id + endpoint, or "none").
* CLI: ``bat verify --state DIR --round N``.
"""
