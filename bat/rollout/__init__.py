"""Multi-turn rollouts, token in / token out: K rollouts per Stage Bank state, budgets, shards.

Public API (team "rollout/verify"; record types in `bat.schemas.rollout`):

* Phase function `bat.rollout.phase.run_rollout(ctx: PhaseContext) -> PhaseResult` (phase "rollout").
  Reads `round_NN/plan.json` (state_ids, start checkpoint) and the pinned bank version; writes
  ``round_NN/rollout/shard_NNNN/`` = ``rollouts.jsonl`` (RolloutRecord, one per rollout, K per
  state_id), ``evidence/<rollout_id>/`` (final workspace of that rollout) and ``DONE.json`` (written
  last; a shard without it is redone, a shard with it is skipped on resume).
  ``bat.rollout.shards.read_rollouts(phase_dir) -> list[RolloutRecord]`` reads every finished shard.
* Engines (`bat.rollout.engine`): `Engine` protocol
  ``generate(requests: list[GenRequest]) -> list[GenResult]`` (token ids in, token ids + behavior
  logprobs out) and ``set_weights(path)`` (reloads weights and flushes any prefix cache);
  ``make_engine(cfg: RolloutConfig, model_path) -> Engine`` picks `hf` (CPU default, transformers
  generate with KV cache, per-request seeded sampling), `vllm` (optional import) or `openai`
  (OpenAI-compatible /v1/completions server, token ids in/out).
* Agent loop (`bat.rollout.loop`): ``run_group(engine, envs, ...)`` drives many rollouts in lockstep:
  one batched generation for every live rollout, then the tool calls of all of them run in parallel
  threads. Budgets (`bat.rollout.budgets`): assistant turns, tool calls, cumulative response tokens,
  observation chars per tool result, context length; each end records `end_reason`.
* Env protocol the loop drives (satisfied by `bat.benchmark.StagedEnv`): ``reset() -> str``,
  ``step(call: dict) -> Observation(text, record, done)``; `call` is a parsed
  ``{"name", "arguments"}`` dict or an invalid-action dict (``{"invalid": True, ...}``).
* Seeds: ``derive_seed(run_seed, round, "rollout", shard, state_id, k)``.
* CLI: ``bat rollout --state DIR --round N`` ; bench: ``bat bench rollout``.
"""
