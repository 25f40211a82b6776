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
"""

from __future__ import annotations

import math
import random
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from bat.config.grpo import GrpoConfig
from bat.seeds import derive_seed
from bat.state.checkpoints import CheckpointStore
from bat.train.checkpoint import export_hf, load_latest, save_step
from bat.train.common import MetricsLog, all_sum, batch_indices, chunks, peak_memory_mb, plan_accumulation, rank_slice
from bat.train.engine import build_engine, grad_norm, init_distributed, record_grad_norm, resolve_precision
from bat.train.grpo_data import GrpoData, GrpoItem, collate_items, global_denominator, pool_reward_means
from bat.train.lora import AdapterBase, AdaptersOff, check_resume, wrap_lora
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


def _micro_step(
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
        _probe_step(engine, batch["input_ids"][:1, :1])
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


def _probe_step(engine: Any, probe_ids: Any) -> None:
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


def _step_record(
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
) -> dict[str, Any]:
    """Run (or resume) the GRPO block up to `cfg.steps` (or `stop_after` steps this call); returns a summary.

    `batches` (state ids of each batch of the round plan) is required with `grpo.step_batches: plan`. `dtype`
    (`model.dtype`) is the load dtype of the policy and of the KL reference copy, and the export's dtype."""
    import torch

    from bat.policy.loader import load_model, load_policy

    if not data.items:
        raise ValueError(f"no trainable rollouts: {data.counts}")
    precision = resolve_precision(cfg.deepspeed, dtype, "grpo.deepspeed")
    env = init_distributed(cfg.deepspeed)
    torch.manual_seed(seed)
    policy = load_policy(model_path, dtype=dtype)
    micro = cfg.deepspeed.micro_batch_per_rank
    if cfg.step_batches == "plan":
        if batches is None:
            raise ValueError("grpo.step_batches = 'plan' needs the round plan's batches; valid without one: 'shuffle'")
        plan_steps = plan_step_batches(data.items, batches)
        if not plan_steps:
            raise ValueError(f"no plan batch lists a state with trainable rollouts ({len(batches)} batches)")
        accum = max(math.ceil(math.ceil(len(b) / env.world) / micro) for b in plan_steps)
    else:
        plan_steps = []
        accum = plan_accumulation(cfg.minibatch, micro, env.world, "grpo.minibatch")
    base = AdapterBase.of(model_path) if cfg.lora.enabled else None
    lora_meta = base.meta() if base else {}
    engine = build_engine(
        wrap_lora(policy.model.train(), cfg.lora),
        cfg.deepspeed,
        precision=precision,
        lr=cfg.lr,
        weight_decay=cfg.weight_decay,
        grad_clip=cfg.grad_clip,
        grad_accum=accum,
        total_steps=cfg.steps,
        warmup_ratio=cfg.warmup_ratio,
        min_lr_ratio=cfg.min_lr_ratio,
    )
    ref = None
    store, log = CheckpointStore(Path(ckpt_root)), MetricsLog(Path(metrics_path), env.is_main)
    step, cursor = 0, 0
    restored = load_latest(engine, store, env, check_meta=partial(check_resume, base=base), dtype=dtype)
    if restored is not None:
        step, cursor = restored[0], int(restored[1]["cursor"])
        log.truncate_after(step)
    else:
        log.reset()
    pad_id, started, ran, last = policy.tokenizer.pad_token_id, time.perf_counter(), 0, {}
    while step < cfg.steps and (stop_after is None or ran < stop_after):
        if plan_steps:
            picked = [data.items[i] for i in plan_steps[plan_batch_of_step(step, len(plan_steps), seed)]]
            mine = picked[env.rank :: env.world]
        else:
            picked = [data.items[i] for i in batch_indices(len(data.items), cursor, cfg.minibatch, seed)]
            mine = rank_slice(picked, env.rank, env.world)
        den = global_denominator(picked, cfg.loss_agg)
        scale = env.world * accum / max(den, 1)
        t0, sums = time.perf_counter(), [0.0] * 6
        at_reference = step == 0  # a restored block has taken steps; a fresh one starts from the reference weights
        if ref is None and cfg.kl_coef > 0 and cfg.kl_reference == "checkpoint" and not at_reference:
            ref = (
                AdaptersOff(engine.module)
                if base
                else load_model(model_path, dtype=dtype, device=str(engine.device)).requires_grad_(False)
            )
        micro_batches = chunks(mine, micro)
        for group in micro_batches:
            part = _micro_step(engine, ref, collate_items(group, pad_id), cfg, scale, at_reference=at_reference)
            record_grad_norm(engine)
            engine.step()
            sums = [a + b for a, b in zip(sums, part)]
        for _ in range(accum - len(micro_batches)):  # a plan batch smaller than the largest one
            _probe_step(engine, torch.tensor([picked[0].ids[:1]]))
            record_grad_norm(engine)
            engine.step()
        step, cursor, ran = step + 1, cursor + (0 if plan_steps else cfg.minibatch), ran + 1
        *sums, tokens = all_sum([*sums, sum(len(i.ids) for i in mine)])
        last = _step_record(step, picked, sums, den, engine, time.perf_counter() - t0, tokens)
        last["padding_microbatches"] = accum - len(micro_batches)
        log.write(last)
        if step % cfg.checkpoint_every == 0 or step == cfg.steps or (stop_after is not None and ran == stop_after):
            save_step(
                engine,
                store,
                step,
                env,
                client_state={"cursor": cursor},
                meta={
                    "kind": "grpo",
                    "cursor": cursor,
                    "seed": seed,
                    "dtype": dtype,
                    "start": str(model_path),
                    **lora_meta,
                },
                keep=cfg.keep_checkpoints,
            )
    done = step >= cfg.steps
    if done:
        extra = {"kind": "grpo", "steps": step, "start": str(model_path)}
        export_hf(engine, policy.tokenizer, export_dir, env, dtype=dtype, extra=extra)
    return {
        "step": step,
        "done": done,
        "last": last,
        "seconds": time.perf_counter() - started,
        "peak_memory_mb": peak_memory_mb(),
        "engine": engine,
        **data.counts,
    }
