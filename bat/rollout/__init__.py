"""Multi-turn rollouts, token in / token out: K rollouts per Stage Bank state, budgets, shards.

Public API (record types in `bat.schemas.rollout`):

* Phase function `bat.rollout.phase.run_rollout(ctx) -> PhaseResult` (alias `rollout`, phase "rollout").
  Reads `round_NN/plan.json` (RoundPlan: state ids, pools, bank version, start checkpoint) and the pinned
  bank version; writes ``round_NN/rollout/shard_NNNN/`` = ``rollouts.jsonl`` (RolloutRecord, K per state_id),
  ``timings.jsonl`` (volatile per-call timings, kept out of the records so reruns are byte-identical),
  ``evidence/<rollout_id>/`` (final workspace) and ``DONE.json`` (the shard dir is renamed into place whole;
  resume skips shards that have it). Seeds: ``derive_seed(run_seed, round, "rollout", shard, state_id, k)``.
* Readers: ``bat.rollout.shards.read_rollouts(phase_dir) -> list[RolloutRecord]`` (finished shards only),
  ``read_shard(dir)``, ``read_timings(dir)``, ``finished_shards(phase_dir)``.
* GRPO contract (RolloutRecord): ``token_ids``, ``loss_mask`` (1 = generated), ``behavior_logprobs``
  (aligned, 0.0 where mask 0; log-prob under ``temperature``), ``prompt_len``, ``state_id`` (group key),
  ``rollout_id``, ``pool``, ``stage``, ``valid``/``invalid_reason`` (infrastructure failures), ``end_reason``.
* Engines (`bat.rollout.engine`): ``Engine`` protocol ``generate(list[GenRequest]) -> list[GenResult]``
  (ids in; ids + behavior logprobs + finish out), ``set_weights(path)`` (reload + flush prefix/KV caches),
  ``release(cache_key)``, ``close()``; ``bat.rollout.engines.make_engine(cfg: RolloutConfig, model_path)`` builds
  `hf` (transformers generate, per-request seeded sampling; batched or per-rollout prefix KV cache),
  `vllm` (vLLM's OpenAI server started by bat on the checkpoint from vLLM's own environment,
  `bat.rollout.vllm_server`; or the offline `LLM` in-process with `rollout.vllm.process: inprocess`),
  `sglang` (SGLang's server started by bat on the checkpoint, `bat.rollout.sglang_server`, spoken to through its
  native /generate; both servers share `bat.rollout.server_process` and `bat.rollout.engine_server`) or
  `openai` (a served policy someone else runs: vLLM /v1/completions with token ids, or SGLang's native /generate with
  `rollout.openai.api: sglang`; `flush_cache_url` on weight change).
* Loop (`bat.rollout.loop`; its inputs and outputs in `bat.rollout.spec`, one rollout in flight in
  `bat.rollout.live`): ``run_rollouts(engine, specs: list[RolloutSpec], TurnTokens, LoopSettings)
  -> list[RolloutOutcome]``; with the `cohorts` schedule cohorts generate in turn while the previous cohort's
  tool calls run in a thread pool, with `continuous` (engines that batch concurrent requests) every rollout
  runs on its own thread; budgets (`bat.rollout.budgets`) end rollouts with ``end_reason`` in
  ``bat.schemas.rollout.END_REASONS``; malformed calls become error observations; a stage row whose reward is
  settled (``RolloutSpec.stage_exit``, ``bat.benchmark.settled``) ends with ``stage_exit``.
* Env protocol (satisfied by `bat.benchmark.StagedEnv`): ``reset() -> str``,
  ``step(call) -> obs(.text, .record, .done)``; call = ``{"name","arguments"}`` or ``{"invalid": True, ...}``.
* Shard driver ``bat.rollout.runner.run_shards(phase_dir, jobs, k=..., open_env=..., engine_factory=...)``.
* CLI: ``bat rollout --round N [--state DIR] [--config F] [--set k=v]``; bench: ``bat bench rollout``.
"""
