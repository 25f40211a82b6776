"""SFT cold start (Eq. 10) on DeepSpeed: loss only on target tokens, warmup-cosine, grad clip, validation loss.

Reads a local HF model (loaded in `dtype`, `model.dtype`, and trained in its DeepSpeed precision) and tokenized
`SftData`; writes step checkpoints under `ckpt_root` (resumed from the newest valid one), `metrics.jsonl` (rank 0)
and an HF export in `dtype` at `export_dir` when all steps are done.
The training loss is the mean negative log-likelihood over every target token of the global batch (a batch is
`global_batch` sequences; a prefix-packed sequence carries several rows, each target token counted once).
With `sft.lora.enabled` only LoRA adapters on the frozen model train (`bat.train.lora`: adapter-only step
checkpoints, a merged export with the adapter beside it).
Setup, resume, checkpoint cadence and export are `bat.train.block`'s; this module holds the data and the loss.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bat.config.sft import SftConfig
from bat.seeds import derive_seed
from bat.train.block import TrainingBlock, open_block
from bat.train.common import all_sum, batch_positions, chunks, plan_accumulation, rank_slice
from bat.train.engine import grad_norm, record_grad_norm
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


@dataclass
class _SftSteps:
    """SFT's step for `TrainingBlock.run`: reads the block's engine and `data`; tracks the latest validation loss."""

    block: TrainingBlock
    data: SftData
    cfg: SftConfig
    seed: int
    val: list[Example]
    pad_id: int
    last_val: float | None = None

    def validate(self) -> float | None:
        """Validation loss of the engine now over `val` (None without validation rows)."""
        b = self.block
        return validation_loss(
            b.engine, self.val, self.pad_id, b.micro, b.env.rank, b.env.world, self.cfg.target_logits_only
        )

    def __call__(self, step: int, cursor: int) -> tuple[int, dict[str, Any] | None]:
        """One optimizer step on the `global_batch` sequences from `cursor` of the seeded shuffle (identifiers renamed
        per epoch); returns the next cursor and the step's record when it is logged (`log_every`, the last step)."""
        b, cfg, data = self.block, self.cfg, self.data
        engine, env = b.engine, b.env
        picked = [
            data.visit(data.train[i], derive_seed(self.seed, "rename", epoch, i))
            for epoch, i in batch_positions(len(data.train), cursor, cfg.global_batch, self.seed)
        ]
        global_tokens = sum(sum(e.mask[1:]) for e in picked)
        mine = rank_slice(picked, env.rank, env.world)
        t0, loss_sum = time.perf_counter(), 0.0
        for group in chunks(mine, b.micro):
            nll, _ = _nll_sum(engine, collate(group, self.pad_id), cfg.target_logits_only)
            engine.backward(nll * (env.world * b.accum) / max(global_tokens, 1))
            record_grad_norm(engine)
            engine.step()
            loss_sum += float(nll.detach())
        step += 1
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
            self.last_val = record["val_loss"] = self.validate()
        logged = step % cfg.log_every == 0 or step == cfg.steps
        return cursor + cfg.global_batch, record if logged else None


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
    `dtype` (`model.dtype`) is the policy's load and export dtype; DeepSpeed trains in its precision.

    Reads `model_path`, `data` and the step checkpoints under `ckpt_root`; writes step checkpoints, `metrics_path`
    (a step-0 validation record on a fresh start) and the export at `export_dir` (`bat.train.block`)."""
    block = open_block(
        model_path,
        cfg,
        kind="sft",
        seed=seed,
        dtype=dtype,
        ckpt_root=ckpt_root,
        metrics_path=metrics_path,
        accum=lambda world: plan_accumulation(
            cfg.global_batch, cfg.deepspeed.micro_batch_per_rank, world, "sft.global_batch"
        ),
    )
    val = data.validation(seed)[: cfg.val_sequences]
    steps = _SftSteps(block, data, cfg, seed, val, block.tokenizer.pad_token_id)
    first_val = steps.validate() if block.step == 0 else None
    if block.step == 0 and first_val is not None:
        block.log.write({"step": 0, "val_loss": first_val})
    steps.last_val = first_val
    done = block.run(
        steps,
        stop_after=stop_after,
        export_dir=export_dir,
        meta={"model": str(model_path)},
        export_extra={"source": str(model_path)},
    )
    head = {"first_val_loss": first_val, "val_loss": steps.last_val}
    return block.summary(done, head, {"tokenizer": block.tokenizer, **data.counts})
