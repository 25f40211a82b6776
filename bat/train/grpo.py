"""GRPO block (Eqs. 17-19) on DeepSpeed over joined rollout/reward items.

Reads the round-start HF checkpoint (policy init, loaded in `dtype` = `model.dtype` and trained in its DeepSpeed
precision; with `grpo.kl_reference: checkpoint` and beta > 0 also a frozen copy in `dtype` as KL reference, loaded
only once the policy has moved away from it, i.e. after a block's first step; by
default the rollouts' behavior log-probs, sampled from that same checkpoint, are the reference) and
`GrpoData`; writes step checkpoints under `ckpt_root` (resumed from the newest valid one),
`metrics.jsonl` (rank 0: loss, KL, clip fraction, reward mean by pool, grad norm, tokens) and the
candidate HF export (in `dtype`) at `export_dir` when all steps are done. Log-probs use each rollout's sampling
temperature so the ratio compares like with like.

A step trains on one batch of the round plan (`grpo.step_batches: plan`: whole GRPO groups, the batch's pool mix,
paper Eq. 5) or on `grpo.minibatch` rollouts of a seeded shuffle (`shuffle`).

With `grpo.lora.enabled` the block trains fresh LoRA adapters on the frozen start checkpoint (`bat.train.lora`;
adapter-only step checkpoints, the candidate export merged with the adapter beside it). The KL reference stays the
round-start policy: `behavior` is unchanged, and `checkpoint` becomes the engine's own model with its adapters
disabled (`bat.train.lora.AdaptersOff`) instead of a second loaded copy. That is exact, not an approximation: the
adapters are created on this block's start checkpoint, never on an older base, with B = 0, and the base weights
stay frozen, so adapters-off computes the start checkpoint itself, on every step and after a resume (which reloads
the same base, its digest checked).

Setup, resume, checkpoint cadence and export are `bat.train.block`'s; this module holds the batches and the loss.
"""

from __future__ import annotations

import math
import random
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bat.config.grpo import GrpoConfig
from bat.seeds import derive_seed
from bat.train.advantage_balance import uncancelled
from bat.train.block import TrainingBlock, open_block
from bat.train.common import all_sum, batch_indices, chunks, plan_accumulation, rank_slice
from bat.train.engine import grad_norm, record_grad_norm
from bat.train.grpo_data import GrpoData, GrpoItem, collate_items, global_denominator, pool_reward_means
from bat.train.lora import AdaptersOff
from bat.train.losses import aggregate_parts, grpo_token_loss, target_logprobs
from bat.train.shared_prefix import shared_prefix_logprobs


def sequence_logprobs(
    model: Any, batch: dict[str, Any], device: Any, targets_only: bool = True, share_prompts: bool = False
) -> Any:
    """log pi(token_t | prefix) for t = 1..T-1 at each row's sampling temperature; `[B, T-1]`. With
    `targets_only` and a `loss_mask` in `batch` only the masked (generated) positions are computed; the others
    hold 0. Without a `loss_mask` every position is computed. With `share_prompts` and rows that share an untrained
    prefix (`batch["shared_prefix"]` tokens, >= 2, more than one row, no activation checkpointing) that prefix runs
    once (`bat.train.shared_prefix`); positions before it then hold 0."""
    mask = batch.get("loss_mask")
    prefix = int(batch.get("shared_prefix", 0))
    if share_prompts and mask is not None and prefix >= 2 and len(batch["input_ids"]) > 1 and not _checkpointing(model):
        return shared_prefix_logprobs(
            model,
            batch["input_ids"].to(device),
            batch["attention_mask"].to(device),
            mask.to(device),
            batch["temperature"].to(device),
            prefix,
            targets_only=targets_only,
        )
    return target_logprobs(
        model,
        batch["input_ids"].to(device),
        batch["attention_mask"].to(device),
        None if mask is None else mask.to(device),
        batch["temperature"].to(device),
        targets_only=targets_only,
    )


def _checkpointing(model: Any) -> bool:
    """Whether the (possibly engine-wrapped) HF model recomputes activations in backward."""
    return bool(getattr(getattr(model, "module", model), "is_activation_checkpointing", False))


def micro_step(
    engine: Any, ref: Any, batch: dict[str, Any], cfg: GrpoConfig, scale: float, *, at_reference: bool
) -> list[float]:
    """Forward/backward one micro-batch; returns [loss numerator, kl sum, clipped count, masked tokens, skipped,
    forwarded tokens].

    The KL term's reference log-probs are the rollouts' behavior log-probs (`grpo.kl_reference: behavior`) or a
    forward of the frozen start checkpoint `ref` (`checkpoint`).

    `at_reference`: the engine still holds the round-start weights the KL reference holds (the first step of a
    fresh block). The reference log-probs are then the policy's own (detached; `ref` may be None), and a
    micro-batch whose advantages are all 0 has an identically zero gradient (the clipped term is 0 and the KL
    term's gradient is 0 at the reference), so only a one-token forward runs to keep DeepSpeed's accumulation
    count; it is counted as skipped. The same holds at any step when `kl_coef` is 0."""
    import torch

    device = engine.device
    mask = batch["loss_mask"].to(device)
    if bool((batch["adv"] == 0).all()) and (cfg.kl_coef == 0 or at_reference):
        probe_step(engine, batch["input_ids"][:1, :1])
        return [0.0, 0.0, 0.0, float(mask.bool().sum()), 1.0, 0.0]
    logp = sequence_logprobs(engine, batch, device, cfg.target_logits_only, cfg.share_prompts)
    ref_logp = None
    if cfg.kl_coef > 0 and at_reference:
        ref_logp = logp.detach()
    elif cfg.kl_coef > 0 and cfg.kl_reference == "behavior":
        ref_logp = batch["behavior_logprobs"].to(device)  # the sampling policy is the round-start reference
    elif ref is not None and cfg.kl_coef > 0:
        with torch.no_grad():
            ref_logp = sequence_logprobs(ref, batch, device, cfg.target_logits_only, cfg.share_prompts)
    per_token, stats = grpo_token_loss(
        logp,
        batch["behavior_logprobs"].to(device),
        ref_logp,
        batch["adv"].to(device),
        mask,
        clip_eps=cfg.clip_eps,
        kl_coef=cfg.kl_coef,
        kl_kind=cfg.kl_estimator,
    )
    num, _ = aggregate_parts(per_token, mask, cfg.loss_agg)
    engine.backward(num * scale)
    m = mask.bool()
    return [
        float(num.detach()),
        float(stats["kl"][m].sum()),
        float((stats["clipped"] & m).sum()),
        float(m.sum()),
        0.0,
        float(batch["attention_mask"].sum()),
    ]


def probe_step(engine: Any, probe_ids: Any) -> None:
    """A zero-gradient micro-step (a one-token forward times 0): keeps DeepSpeed's accumulation count when a
    micro-batch has nothing to learn or a step has fewer micro-batches than the accumulation steps."""
    import torch

    probe = probe_ids.to(engine.device)
    engine.backward(engine(input_ids=probe, attention_mask=torch.ones_like(probe)).logits.sum() * 0.0)


def plan_step_batches(items: Sequence[GrpoItem], batches: Sequence[Sequence[str]]) -> list[list[int]]:
    """Indices into `items` of each plan batch's trainable rollouts: every rollout of every state the batch lists
    (each GRPO group whole), in batch order; batches without a trainable rollout are left out. A step trained on
    one batch sees the batch's pool mix (paper Eq. 5, rho of App. A.4: 4 / 2 / 2 of 8 rows by default)."""
    by_state: dict[str, list[int]] = defaultdict(list)
    for index, item in enumerate(items):
        by_state[item.state_id].append(index)
    steps = [[i for sid in dict.fromkeys(batch) for i in by_state.get(sid, [])] for batch in batches]
    return [step for step in steps if step]


def plan_batch_of_step(step: int, n_batches: int, seed: int) -> int:
    """The plan batch (index into `plan_step_batches`) trained at optimizer step `step` (0-based): steps pass
    through the batches in a seeded order that changes with every pass."""
    epoch, position = divmod(step, n_batches)
    order = list(range(n_batches))
    random.Random(derive_seed(seed, "grpo-batches", epoch)).shuffle(order)
    return order[position]


def step_record(
    step: int, picked: Sequence[GrpoItem], sums: list[float], den: int, engine: Any, seconds: float, tokens: float
) -> dict[str, Any]:
    loss_num, kl_sum, clipped, masked, skipped, forwarded = sums
    return {
        "step": step,
        "loss": loss_num / max(den, 1),
        "kl": kl_sum / max(masked, 1),
        "zero_advantage_microbatches_skipped": int(skipped),
        "clip_frac": clipped / max(masked, 1),
        "grad_norm": grad_norm(engine),
        "lr": engine.get_lr()[0],
        "tokens": int(tokens),
        "generated_tokens": int(masked),
        "rollouts": len(picked),
        "rollouts_by_pool": dict(sorted(Counter(i.pool for i in picked).items())),
        "groups": len({i.state_id for i in picked}),
        "reward_mean": sum(i.reward for i in picked) / len(picked),
        "reward_mean_by_pool": pool_reward_means(picked),
        "adv_abs_mean": sum(abs(i.adv) for i in picked) / len(picked),
        "tokens_per_s": forwarded / max(seconds, 1e-9),
    }


def _plan_and_accum(
    data: GrpoData, cfg: GrpoConfig, batches: Sequence[Sequence[str]] | None
) -> tuple[list[list[int]], Callable[[int], int]]:
    """The plan steps (`plan_step_batches`; empty with `grpo.step_batches: shuffle`) and the gradient-accumulation
    steps as a function of the world size (enough micro-batches for the largest plan batch, or `grpo.minibatch`).
    Raises ValueError without trainable rollouts, or in plan mode without `batches` or a batch that trains."""
    if not data.items:
        raise ValueError(f"no trainable rollouts: {data.counts}")
    micro = cfg.deepspeed.micro_batch_per_rank
    if cfg.step_batches != "plan":
        return [], lambda world: plan_accumulation(cfg.minibatch, micro, world, "grpo.minibatch")
    if batches is None:
        raise ValueError("grpo.step_batches = 'plan' needs the round plan's batches; valid without one: 'shuffle'")
    plan_steps = plan_step_batches(data.items, batches)
    if not plan_steps:
        raise ValueError(f"no plan batch lists a state with trainable rollouts ({len(batches)} batches)")
    return plan_steps, lambda world: max(math.ceil(math.ceil(len(b) / world) / micro) for b in plan_steps)


@dataclass
class _GrpoSteps:
    """GRPO's step for `TrainingBlock.run`: reads the block's engine and `data`; loads the KL reference on demand and
    keeps the last step's record (`last`)."""

    block: TrainingBlock
    data: GrpoData
    cfg: GrpoConfig
    plan_steps: list[list[int]]
    ref: Any = None
    last: dict[str, Any] = field(default_factory=dict)

    def pick(self, step: int, cursor: int) -> tuple[list[GrpoItem], list[GrpoItem]]:
        """The global batch of optimizer step `step` (a plan batch, or `minibatch` rollouts from `cursor` of the
        seeded shuffle) and this rank's share of it."""
        env, seed, items = self.block.env, self.block.seed, self.data.items
        if self.plan_steps:
            picked = [items[i] for i in self.plan_steps[plan_batch_of_step(step, len(self.plan_steps), seed)]]
            return picked, picked[env.rank :: env.world]
        picked = [items[i] for i in batch_indices(len(items), cursor, self.cfg.minibatch, seed)]
        return picked, rank_slice(picked, env.rank, env.world)

    def reference(self, at_reference: bool) -> Any:
        """The frozen KL reference with `kl_reference: checkpoint` and beta > 0, loaded (in the block's dtype) once the
        policy has left the start weights: the start checkpoint, or with LoRA the engine's model with adapters off."""
        b, cfg = self.block, self.cfg
        if self.ref is None and cfg.kl_coef > 0 and cfg.kl_reference == "checkpoint" and not at_reference:
            from bat.policy.loader import load_model

            self.ref = (
                AdaptersOff(b.engine.module)
                if b.base
                else load_model(b.model_path, dtype=b.dtype, device=str(b.engine.device)).requires_grad_(False)
            )
        return self.ref

    def __call__(self, step: int, cursor: int) -> tuple[int, dict[str, Any]]:
        """One optimizer step (micro-batches, then zero-gradient padding up to the accumulation steps); returns the
        next cursor and the step's record."""
        import torch

        b, cfg = self.block, self.cfg
        engine, env = b.engine, b.env
        picked, mine = self.pick(step, cursor)
        den = global_denominator(picked, cfg.loss_agg)
        scale = env.world * b.accum / max(den, 1)
        t0, sums = time.perf_counter(), [0.0] * 6
        at_reference = step == 0  # a restored block has taken steps; a fresh one starts from the reference weights
        ref = self.reference(at_reference)
        micro_batches = chunks(mine, b.micro)
        for group in micro_batches:
            batch = collate_items(group, b.tokenizer.pad_token_id)
            part = micro_step(engine, ref, batch, cfg, scale, at_reference=at_reference)
            record_grad_norm(engine)
            engine.step()
            sums = [x + y for x, y in zip(sums, part)]
        for _ in range(b.accum - len(micro_batches)):  # a plan batch smaller than the largest one
            probe_step(engine, torch.tensor([picked[0].ids[:1]]))
            record_grad_norm(engine)
            engine.step()
        *sums, tokens = all_sum([*sums, sum(len(i.ids) for i in mine)])
        record = step_record(step + 1, picked, sums, den, engine, time.perf_counter() - t0, tokens)
        record["padding_microbatches"] = b.accum - len(micro_batches)
        record["adv_uncancelled"] = uncancelled(picked, cfg.loss_agg)
        self.last = record
        return cursor + (0 if self.plan_steps else cfg.minibatch), record


def train_grpo(
    model_path: str | Path,
    data: GrpoData,
    cfg: GrpoConfig,
    *,
    seed: int,
    ckpt_root: str | Path,
    export_dir: str | Path,
    metrics_path: str | Path,
    stop_after: int | None = None,
    batches: Sequence[Sequence[str]] | None = None,
    dtype: str = "float32",
    carry_from: str | Path | None = None,
) -> dict[str, Any]:
    """Run (or resume) the GRPO block up to `cfg.steps` (or `stop_after` steps this call); returns a summary.

    `batches` (state ids of each batch of the round plan) is required with `grpo.step_batches: plan`. `dtype`
    (`model.dtype`) is the load dtype of the policy and of the KL reference copy, and the export's dtype.
    Reads `model_path`, `data` and the step checkpoints under `ckpt_root`; writes step checkpoints, `metrics_path`
    (one record per step; the summary's `last`) and the candidate export at `export_dir` (`bat.train.block`)."""
    plan_steps, accum = _plan_and_accum(data, cfg, batches)
    block = open_block(
        model_path,
        cfg,
        kind="grpo",
        seed=seed,
        dtype=dtype,
        ckpt_root=ckpt_root,
        metrics_path=metrics_path,
        accum=accum,
        carry_from=carry_from,
    )
    steps = _GrpoSteps(block, data, cfg, plan_steps)
    done = block.run(
        steps,
        stop_after=stop_after,
        export_dir=export_dir,
        meta={"start": str(model_path)},
        export_extra={"start": str(model_path)},
    )
    return block.summary(done, {"last": steps.last}, data.counts)
