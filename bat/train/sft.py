"""SFT cold start (Eq. 10) on DeepSpeed: loss only on target tokens, warmup-cosine, grad clip, validation loss.

Reads a local HF model (loaded in `dtype`, `model.dtype`, and trained in its DeepSpeed precision) and tokenized
`SftData`; writes step checkpoints under `ckpt_root` (resumed from the newest valid one), `metrics.jsonl` (rank 0)
and an HF export in `dtype` at `export_dir` when all steps are done.
The training loss is the mean negative log-likelihood over every target token of the global batch (a batch is
`global_batch` sequences; a prefix-packed sequence carries several rows, each target token counted once).
With `sft.lora.enabled` only LoRA adapters on the frozen model train (`bat.train.lora`: adapter-only step
checkpoints, a merged export with the adapter beside it).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from bat.config.sft import SftConfig
from bat.seeds import derive_seed
from bat.state.checkpoints import CheckpointStore
from bat.train.checkpoint import export_hf, load_latest, save_step
from bat.train.common import MetricsLog, all_sum, batch_positions, chunks, peak_memory_mb, plan_accumulation, rank_slice
from bat.train.engine import build_engine, grad_norm, init_distributed, record_grad_norm, resolve_precision
from bat.train.lora import AdapterBase, check_resume, wrap_lora
from bat.train.losses import target_logprobs
from bat.train.sft_data import Example, SftData, collate


def _nll_sum(engine: Any, batch: dict[str, Any], targets_only: bool = True) -> tuple[Any, int]:
    """Summed target-token NLL of one micro-batch (with grad) and its target-token count; `targets_only`
    projects to the vocabulary only at target positions (`bat.train.losses.target_logprobs`)."""
    import torch

    device = engine.device
    mask = batch["loss_mask"].to(device).bool()
    logp = target_logprobs(
        engine, batch["input_ids"].to(device), batch["attention_mask"].to(device), mask, targets_only=targets_only
    )
    return torch.where(mask, -logp, torch.zeros_like(logp)).sum(), int(mask.sum())


def validation_loss(
    engine: Any, examples: Sequence[Example], pad_id: int, micro: int, rank: int, world: int, targets_only: bool = True
) -> float | None:
    """Mean target-token NLL over `examples` (sharded round-robin over ranks); None without validation rows."""
    import torch

    if not examples:
        return None
    engine.eval()
    total, tokens = 0.0, 0
    with torch.no_grad():
        for group in chunks(list(examples)[rank::world], micro):
            nll, count = _nll_sum(engine, collate(group, pad_id), targets_only)
            total, tokens = total + float(nll), tokens + count
    engine.train()
    total, tokens = all_sum([total, tokens])
    return total / tokens if tokens else None


def train_sft(
    model_path: str | Path,
    data: SftData,
    cfg: SftConfig,
    *,
    seed: int,
    ckpt_root: str | Path,
    export_dir: str | Path,
    metrics_path: str | Path,
    stop_after: int | None = None,
    dtype: str = "float32",
) -> dict[str, Any]:
    """Run (or resume) SFT up to `cfg.steps` (or `stop_after` steps, to simulate preemption); returns a summary.
    `dtype` (`model.dtype`) is the policy's load and export dtype; DeepSpeed trains in its precision."""
    import torch

    from bat.policy.loader import load_policy

    precision = resolve_precision(cfg.deepspeed, dtype, "sft.deepspeed")
    env = init_distributed(cfg.deepspeed)
    torch.manual_seed(seed)
    policy = load_policy(model_path, dtype=dtype)
    tokenizer, model = policy.tokenizer, wrap_lora(policy.model.train(), cfg.lora)
    base = AdapterBase.of(model_path) if cfg.lora.enabled else None
    lora_meta = base.meta() if base else {}
    micro = cfg.deepspeed.micro_batch_per_rank
    accum = plan_accumulation(cfg.global_batch, micro, env.world, "sft.global_batch")
    engine = build_engine(
        model,
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
    store = CheckpointStore(Path(ckpt_root))
    log = MetricsLog(Path(metrics_path), env.is_main)
    step, cursor = 0, 0
    restored = load_latest(engine, store, env, check_meta=partial(check_resume, base=base), dtype=dtype)
    if restored is not None:
        step, state = restored
        cursor = int(state["cursor"])
        log.truncate_after(step)
    else:
        log.reset()
    pad_id = tokenizer.pad_token_id
    val = data.validation(seed)[: cfg.val_sequences]
    first_val = (
        validation_loss(engine, val, pad_id, micro, env.rank, env.world, cfg.target_logits_only) if step == 0 else None
    )
    if step == 0 and first_val is not None:
        log.write({"step": 0, "val_loss": first_val})
    last_val, started, ran = first_val, time.perf_counter(), 0
    while step < cfg.steps and (stop_after is None or ran < stop_after):
        picked = [
            data.visit(data.train[i], derive_seed(seed, "rename", epoch, i))
            for epoch, i in batch_positions(len(data.train), cursor, cfg.global_batch, seed)
        ]
        global_tokens = sum(sum(e.mask[1:]) for e in picked)
        mine = rank_slice(picked, env.rank, env.world)
        t0, loss_sum, tokens = time.perf_counter(), 0.0, 0
        for group in chunks(mine, micro):
            nll, count = _nll_sum(engine, collate(group, pad_id), cfg.target_logits_only)
            engine.backward(nll * (env.world * accum) / max(global_tokens, 1))
            record_grad_norm(engine)
            engine.step()
            loss_sum, tokens = loss_sum + float(nll.detach()), tokens + count
        step, cursor, ran = step + 1, cursor + cfg.global_batch, ran + 1
        loss_sum, all_tokens = all_sum([loss_sum, sum(len(e.ids) for e in mine)])
        record = {
            "step": step,
            "loss": loss_sum / max(global_tokens, 1),
            "lr": engine.get_lr()[0],
            "rows": sum(e.rows for e in picked),
            "sequences": len(picked),
            "grad_norm": grad_norm(engine),
            "target_tokens": global_tokens,
            "tokens": int(all_tokens),
            "tokens_per_s": all_tokens / max(time.perf_counter() - t0, 1e-9),
        }
        if (step % cfg.val_every == 0 or step == cfg.steps) and data.val:
            last_val = record["val_loss"] = validation_loss(
                engine, val, pad_id, micro, env.rank, env.world, cfg.target_logits_only
            )
        if step % cfg.log_every == 0 or step == cfg.steps:
            log.write(record)
        if step % cfg.checkpoint_every == 0 or step == cfg.steps or (stop_after is not None and ran == stop_after):
            save_step(
                engine,
                store,
                step,
                env,
                client_state={"cursor": cursor},
                meta={
                    "kind": "sft",
                    "cursor": cursor,
                    "seed": seed,
                    "dtype": dtype,
                    "model": str(model_path),
                    **lora_meta,
                },
                keep=cfg.keep_checkpoints,
            )
    done = step >= cfg.steps
    if done:
        extra = {"kind": "sft", "steps": step, "source": str(model_path)}
        export_hf(engine, tokenizer, export_dir, env, dtype=dtype, extra=extra)
    return {
        "step": step,
        "done": done,
        "first_val_loss": first_val,
        "val_loss": last_val,
        "seconds": time.perf_counter() - started,
        "peak_memory_mb": peak_memory_mb(),
        "engine": engine,
        "tokenizer": tokenizer,
        **data.counts,
    }
