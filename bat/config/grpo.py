"""GrpoConfig: the inner-loop GRPO block (Eqs. 4, 17-19) on rollout + reward shards.

Every block starts a fresh optimizer and schedule from the round's start checkpoint (the paper's
"optimizer reset between rounds") unless `carry_optimizer` keeps the previous round's; a resumed, interrupted
block restores its own optimizer state.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from bat.config.base import Section
from bat.config.deepspeed import DeepSpeedConfig
from bat.config.lora import LoraConfig


class GrpoConfig(Section):
    steps: int = Field(50, ge=1, le=10_000_000)
    """Optimizer steps per round (paper: 50)."""
    lr: float = Field(1e-6, gt=0.0, le=1.0)
    """Actor learning rate (paper 1e-6, reference 2.5e-7)."""
    warmup_ratio: float = Field(0.0, ge=0.0, lt=1.0)
    """Fraction of steps with linear warmup before the cosine decay."""
    min_lr_ratio: float = Field(1.0, ge=0.0, le=1.0)
    """Final lr as a fraction of `lr` (1.0 = constant after warmup)."""
    weight_decay: float = Field(0.0, ge=0.0, le=1.0)
    """Decoupled weight decay (AdamW); L2 weight decay with `optimizer: sgd`."""
    optimizer: Literal["adamw", "sgd"] = "adamw"
    """`adamw` (paper; betas 0.9/0.999, eps 1e-8), or `sgd`: a plain step of lr x the clipped gradient, no momentum.
    A block starts a fresh optimizer, so with few steps AdamW's update is lr x g / (|g| + eps), lr x sign(g) for
    every weight whatever the gradient's size (measured: one step at lr 5e-5 moved 69-70% of SmolLM2-135M's weights
    by lr, L2 norm 0.50 in every round, from rounds with reward 0.028 to 0.121); an `sgd` step scales with the
    gradient, so a round whose GRPO groups carry little signal moves the policy little. Its lr is on another scale
    (choose it with `bat train lr-probe`)."""
    grad_clip: float = Field(1.0, gt=0.0)
    """Global gradient-norm clip (before the step; a gradient below it is left as it is). With `optimizer: sgd` it
    bounds a step's L2 norm by lr x grad_clip: a round whose every group carries signal (a larger gradient) moves the
    policy no further than that; the step's unclipped norm is logged as `grad_norm` in the round's metrics."""
    step_batches: Literal["plan", "shuffle"] = "plan"
    """What one optimizer step trains on. `plan` (paper Eq. 5, the round mixture per batch): the rollouts of one
    batch of the round plan, every GRPO group whole in its step and the step's pool mix the batch's (4/2/2 by
    default); steps cycle through the round's batches, in a new seeded order on each pass. A step's size is the
    batch's rows x K (fewer when rollouts are excluded); gradient accumulation runs to the largest batch, shorter
    ones are filled with zero-gradient probe micro-batches. `shuffle`: `minibatch` rollouts per step from a seeded
    shuffle of all the round's rollouts (groups may be split across steps, the mix is whatever falls in)."""
    minibatch: int = Field(8, ge=1)
    """Rollouts per optimizer step over all ranks with `step_batches: shuffle` (paper ablation: 8); `plan` takes
    the step size from the plan batch instead."""
    rollouts: Literal["round", "online"] = "round"
    """Where a step's rollouts come from. `round`: the round's rollout and verify phases, sampled once from the
    round-start policy; steps are PPO-style epochs over them (`step_batches`), the ratio and clip correcting for the
    policy moving away from the sampler. `online`: every step rolls out a fresh batch (one plan batch of states, K
    rollouts each) from the current weights, verifies it and trains on it (`bat.online`); the optimizer's state
    carries from step to step, and each step's rollouts and rewards are kept under the phase's `steps/` folder."""
    online_record: bool = True
    """With `rollouts: online`: the round's rollout and verify phases roll out the plan's first batch once from the
    round-start weights, a record for the round report's failure breakdown (the block rolls out its own batches).
    False = they roll out nothing (the block's per-step shards under `grpo/steps/` are the round's rollouts),
    saving one batch's rollouts a round."""
    online_epochs: int = Field(1, ge=1, le=64)
    """With `rollouts: online`: optimizer updates on each fresh batch (1 = strictly on-policy; more = PPO-style
    epochs over the batch, where the ratio and clip do their job)."""
    shuffle_rewards: bool = False
    """The shuffled-reward twin: each step's rewards are permuted across that step's rollouts (seeded) before
    advantages are computed, everything else identical, so an arm's learning can be told from a generic effect of
    policy-gradient updates. Metrics keep the true rewards (`reward_mean`) beside the trained ones."""
    dynamic_sampling: int = Field(0, ge=0, le=16)
    """With `rollouts: online`: how many times a step may replace a GRPO group whose rewards are all equal (no
    signal) by a fresh group of another state of the same pool (DAPO-style; 0 = off). The step keeps its size: a
    group that is still identical after the tries trains as it is. Counted per step."""
    pass_rate_filter: int = Field(0, ge=0, le=100)
    """With `rollouts: online`: after this many draws in a row of a state whose every rollout failed (reward 0) or
    every one solved (reward 1), the state is set aside for the rest of the block (its place in later batches goes
    to another state of its pool, as dynamic sampling draws them); counted per pool. 0 = off."""
    carry_optimizer: bool = False
    """Keep the optimizer state across rounds: a round whose start checkpoint is the previous round's candidate
    takes the AdamW moments of that round's last step checkpoint (its schedule restarts); a round that starts
    elsewhere (a fallback) starts fresh, as the paper's "optimizer reset between rounds" does by default. Not with
    LoRA (each round trains fresh adapters)."""
    export_steps: tuple[int, ...] = ()
    """With `rollouts: online`: steps (1-based) after which the current weights are also exported in HF format
    (`OnlineLayout.export`: `round_NN/grpo/exports/step_NNNNN/`), so `bat evaluate probe` can score the training
    curve from the evaluation side (the block itself never reads held-out content); the last step's weights are the
    candidate export either way. Empty = only the end-of-block export."""
    clip_eps: float = Field(0.2, gt=0.0, lt=1.0)
    """PPO-style ratio clip epsilon in Eq. 18."""
    kl_coef: float = Field(1e-3, ge=0.0)
    """beta: KL penalty toward the round-start policy (paper 1e-3, reference 0.006)."""
    kl_estimator: Literal["k1", "k2", "k3"] = "k3"
    """Per-token KL estimator (k3 default)."""
    kl_reference: Literal["behavior", "checkpoint"] = "behavior"
    """Where the reference log-probs of the KL term come from. The reference is the round-start policy, which is
    also the policy that sampled the round's rollouts, and the KL is taken on the sampled (generated) tokens only,
    so `behavior`: the rollouts' recorded behavior log-probs are the reference's, no reference model is loaded and
    no reference forward runs (they agree with the checkpoint scored by the trainer to ~1e-5 in fp32 with the `hf`
    engine; a served engine is checked against the checkpoint to its `probe_tolerance`). `checkpoint`: a
    frozen copy of the start checkpoint scores every step's rollouts again (one more forward per micro-batch;
    needed only when rollouts were sampled by some other policy than the block's start checkpoint). Either way
    the first step of a fresh block uses the policy's own log-probs, which equal the reference's exactly."""
    normalize_std: bool = True
    """Divide group-centred rewards by the group std (reference release: off)."""
    adv_eps: float = Field(1e-6, gt=0.0)
    """epsilon_adv added to the group std."""
    loss_agg: Literal["token-mean", "seq-mean-token-mean"] = "seq-mean-token-mean"
    """Loss aggregation: mean over all masked tokens, or mean over rollouts of per-rollout token means (the paper's
    Eq. 19 and the reference release). Under `token-mean` a group's long members outweigh its short ones, so a
    group whose failing member is long pushes down the tokens every member shares (tool-call syntax); per-rollout
    means weigh each member by its advantage alone, which sums to zero over the group."""
    stage_row_credit: Literal["all-turns", "own-stage"] = "own-stage"
    """Which turns of a stage row (S-target / S-mix) carry the row's advantage into the loss. `all-turns`: every
    generated turn. `own-stage`: a turn the environment tagged with a later stage than the row's (the batch run that
    settles an S3 row, a `submit` that ends an S3 row before any batch, and every call, malformed ones too, once the
    episode has moved on to a later stage) is left out of the loss: the row's rubric scores only the work of its own
    stage (paper Eq. 11), so such a turn's advantage says nothing about it. E2E rows are trained on every turn
    either way, and every rollout still counts in its group's statistics."""
    max_seq_len: int = Field(8192, ge=16)
    """Rollouts longer than this are dropped before training (counted)."""
    checkpoint_every: int = Field(5, ge=1)
    """Save a resumable step checkpoint every this many steps (paper: 5)."""
    keep_checkpoints: int = Field(3, ge=1)
    """Keep the newest K step checkpoints (paper: 3)."""
    target_logits_only: bool = True
    """Project hidden states to vocabulary logits only at trained positions (same loss and gradients; the
    `[B, T, V]` logits of every context token are what dominates memory on long contexts). False computes
    them everywhere (the reference `bat bench train --logits` compares against)."""
    share_prompts: bool = True
    """Compute the token prefix that the rollouts of a micro-batch share (the prompt of a GRPO group: system turn,
    tool list, task and any replayed history) once per micro-batch, forward and backward, instead of once per
    rollout (`bat.train.shared_prefix`; the same log-probs and gradients up to float summation order). It pays
    with `deepspeed.micro_batch_per_rank` >= 2 and groups whole in a micro-batch (`step_batches: plan`). Off, or
    under activation checkpointing (whose recomputation cannot replay a KV cache), every row runs in full."""
    deepspeed: DeepSpeedConfig = DeepSpeedConfig(micro_batch_per_rank=2)
    """Engine settings."""
    lora: LoraConfig = LoraConfig()
    """LoRA adapters instead of full-parameter training (off by default; `bat.config.lora`)."""

    @model_validator(mode="after")
    def _carry_needs_full_parameters(self) -> GrpoConfig:
        if self.carry_optimizer and self.lora.enabled:
            raise ValueError(
                "grpo.carry_optimizer needs full-parameter training: each round trains fresh LoRA adapters"
            )
        bad = [s for s in self.export_steps if not 1 <= s <= self.steps]
        if bad:
            raise ValueError(f"grpo.export_steps {bad} outside the block's steps; valid: 1..{self.steps} (grpo.steps)")
        if self.export_steps and self.rollouts != "online":
            raise ValueError(
                "grpo.export_steps needs grpo.rollouts: online (a round-mode block exports once, at its end)"
            )
        return self
