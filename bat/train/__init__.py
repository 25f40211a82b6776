"""Training side of bat on DeepSpeed: SFT cold start (Eq. 10), GRPO block (Eqs. 4, 17-19), checkpoints, export.

Public API (stable; other teams code against it):

* Phase functions (`bat.train.phase`): `run_sft(ctx) -> PhaseResult`, `run_grpo(ctx) -> PhaseResult`.
* `bat.train.losses` (pure torch, hand-checkable):
    - `group_advantages(rewards, group_ids, valid, normalize_std=True, eps=1e-6) -> Tensor`
      (groups = state_id only; invalid rollouts get advantage 0 and never enter group stats)
    - `kl_penalty(logp, ref_logp, kind="k3") -> Tensor` per token (k1, k2, k3)
    - `clipped_objective(logp, behavior_logp, adv, clip_eps) -> (per-token g, clipped mask)`
    - `aggregate(values, mask, mode)`; modes `token-mean`, `seq-mean-token-mean`
    - `grpo_loss(logp, behavior_logp, ref_logp, adv, mask, cfg) -> (loss, stats)`
* Inputs GRPO reads: rollout shards of `bat.schemas.rollout.RolloutRecord` (token_ids, loss_mask,
  behavior_logprobs aligned with token_ids (0.0 where loss_mask==0), state_id, pool, valid) and
  reward shards of `RewardRecord` (rollout_id, reward or None, valid). A rollout enters a group only
  if both records are valid and reward is not None.
* `bat.train.sft.train_sft(...)`, `bat.train.grpo.train_grpo(...)`: usable alone on given files
  (see `bat train sft --help`, `bat train grpo --help`); launch multi-process with
  `torchrun`/`srun` (env RANK/WORLD_SIZE/LOCAL_RANK or SLURM_PROCID/SLURM_NTASKS are read).
* Checkpoints: `<out>/step_NNNNNN/` valid only with its metadata file; resume restores weights,
  optimizer, scheduler, RNG and data cursor; `export_hf(engine, tokenizer, out_dir)` writes an HF
  safetensors directory loadable by `bat.policy.load_policy`.
* `bat.train.kl_estimate.estimate_kl(candidate_path, reference_path, prompts) -> float`
  mean per-token KL(candidate || reference) over a fixed prompt set (fallback rule, tau).

Config sections: `ModelConfig` (bat/config/model.py), `SftConfig` (bat/config/sft.py),
`GrpoConfig` (bat/config/grpo.py), `DeepSpeedConfig` (bat/config/deepspeed.py).
"""
