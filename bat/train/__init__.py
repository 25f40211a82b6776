"""Training side of bat on DeepSpeed: SFT cold start (Eq. 10), GRPO block (Eqs. 4, 17-19), checkpoints, export.

Public API (stable; the other packages code against it):

* Phase functions (`bat.train.phase`): `run_sft(ctx)` (alias `sft`) and `run_grpo(ctx)` (alias `grpo`)
  -> PhaseResult with `extra["candidate"]` = the HF export (`layout.candidate_model(round)`).
  sft reads the newest admitted bank's SFT rows + `model.path` (or builds `models/tiny`); grpo reads
  `round_NN/plan.json` (start_checkpoint), `round_NN/rollout/shard_*/rollouts.jsonl` and
  `round_NN/verify/shard_*/rewards.jsonl` of shards with DONE.json.
* `bat.train.losses` (pure torch, hand-checkable):
    - `group_advantages(rewards, group_ids, valid=None, *, normalize_std=True, eps=1e-6) -> Tensor`
      (groups = state_id only; population std; invalid members get 0 and never enter group stats;
      an all-equal group gets 0)
    - `kl_penalty(logp, ref_logp, kind="k3")` per token (k1 = -x, k2 = x^2/2, k3 = e^x - 1 - x,
      x = ref_logp - logp)
    - `clipped_objective(logp, behavior_logp, adv, clip_eps, mask=None) -> (g, clipped)`
    - `aggregate(values, mask, mode)` / `aggregate_parts(...) -> (num, den)`; modes `token-mean`,
      `seq-mean-token-mean`
    - `grpo_loss(logp, behavior_logp, ref_logp, adv, mask, *, clip_eps, kl_coef, kl_kind, agg) -> (loss, stats)`
    - `target_logprobs(model, input_ids, attention_mask, loss_mask, temperature=None, *, targets_only=True)`
      `[B, T-1]` next-token log-probs; with `targets_only` the vocabulary projection runs only at masked positions
      (`logits_to_keep`; switch `sft.target_logits_only` / `grpo.target_logits_only`)
* Inputs GRPO reads: `bat.schemas.rollout.RolloutRecord` (token_ids, loss_mask, behavior_logprobs aligned
  with token_ids, temperature, state_id, pool, valid) and `RewardRecord` (rollout_id, reward or None,
  valid). `bat.train.grpo_data.build_items(rollouts, rewards, *, max_seq_len, normalize_std, adv_eps)
  -> GrpoData(items, counts)`: a rollout joins its group only if rollout and reward are valid and the
  reward is not None (counts name every exclusion). `grpo_data(cfg, rollout_files, reward_files)` is that under
  `cfg` (the grpo phase and `bat train grpo` both call it).
* `bat.train.sft.train_sft(model_path, data, cfg, *, seed, ckpt_root, export_dir, metrics_path, stop_after=None,
  dtype="float32")` and `bat.train.grpo.train_grpo(...)` (same keywords): run or resume; return a summary dict.
  Both run on `bat.train.block` (`open_block(...) -> TrainingBlock`, `TrainingBlock.run(step_fn, ...)`): policy load,
  engine, resume, metrics log, checkpoint cadence and export live there; a trainer supplies its data and step.
  `dtype` (`model.dtype`) is the policy's load and export dtype (and the KL reference's); DeepSpeed trains in its
  precision (`bat.train.engine.resolve_precision`: bfloat16 -> bf16 with fp32 master weights; float16 needs CUDA).
  `bat.train.sft_data.prepare_sft(train_rows, val_rows, tokenizer, max_seq_len, tools=None, *, pack=False)
  -> SftData` (overlong rows rejected and counted, never clipped; counts per split: rows, kept,
  rejected_overlong, rejected_no_target, sequences, target_tokens, tokens, tokens_unpacked).
  `sft_data(cfg.sft, train_rows, val_rows, tokenizer)` is that under the config (tools, packing, renaming; the sft
  phase and `bat train sft` both call it).
  `bat.train.sft_pack.pack_prefixes(examples) -> (packed, counts)`: rows of one trajectory whose ids are an
  exact token prefix of a longer row's context ride in that row's sequence (mask marks every target; per-token
  losses and the token-mean loss unchanged; `Example.rows` = rows carried). Switch: `sft.pack_prefixes`
  (default true); then `sft.global_batch` counts sequences.
* Launch: a lone process runs as a 1-rank gloo group; multi-process with
  `torchrun --nproc-per-node N -m bat.cli.main train sft|grpo ...` or `srun python -m bat.cli.main train ...`
  (SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID mapped to RANK/WORLD_SIZE/LOCAL_RANK; nccl on GPU).
* Checkpoints (`bat.train.checkpoint`): `<root>/step_NNNNNN/` (DeepSpeed weights + optimizer + scheduler +
  cursor, `rng_rank<R>.pt`, `meta.json` written last); resume restores all of them exactly; newest K kept.
  `export_hf(engine, tokenizer, out_dir, env, *, dtype, extra)` writes an HF safetensors directory in `dtype`
  (ZeRO-3 gathered) and `bat_export.json` (`extra` + the dtype).
* LoRA (`bat.train.lora`, switch `sft.lora.enabled` / `grpo.lora.enabled`, `LoraConfig` in bat/config/lora.py):
  `wrap_lora(model, cfg)` freezes the model under peft adapters before the engine is built; step checkpoints then
  hold only the adapters and their optimizer state (`meta.json` records the base's digest, checked on resume);
  `export_hf` writes the merged full model plus the adapter under `bat.state.checkpoints.adapter_dir(export)`.
  GRPO's `kl_reference: checkpoint` is then the engine's model with adapters off (`AdaptersOff`).
* `bat.train.kl_estimate.estimate_kl(candidate, reference, prompts, *, max_new_tokens=32, seed=0, tools=None,
  dtype="float32") -> float`: mean per-token KL(candidate || reference) over candidate-sampled continuations of
  fixed prompts (chat message lists or token-id lists); both models loaded in `dtype`, the KL computed in fp32.
* `bat.train.advantage_balance.uncancelled(items, mode)`: the share of a step's advantage weight that does not
  cancel within its groups under a loss aggregation (0 under `seq-mean-token-mean`; under `token-mean` a group's long
  low-reward members push its shared tokens down); `net_weight(items, mode)` the signed share of one group;
  `python -m bat.train.advantage_balance ROUND_DIR` prints both for a finished round.
* Metrics (`metrics.jsonl`, one line per step): loss, kl, clip_frac, grad_norm, lr, tokens,
  generated_tokens, rollouts, reward_mean, reward_mean_by_pool, adv_abs_mean, adv_uncancelled, tokens_per_s (GRPO);
  loss, lr, rows, sequences, grad_norm, target_tokens, tokens, tokens_per_s, val_loss (SFT).

Config sections: `ModelConfig` (bat/config/model.py), `SftConfig` (bat/config/sft.py),
`GrpoConfig` (bat/config/grpo.py), `DeepSpeedConfig` (bat/config/deepspeed.py, nested as `sft.deepspeed`
and `grpo.deepspeed`), `LoraConfig` (bat/config/lora.py, nested as `sft.lora` and `grpo.lora`). CLI: `bat train sft`, `bat train grpo`; bench: `bat bench train`,
`bat bench sft_pack` (prefix packing x tokenizer corpus).
"""
