"""One training block, the skeleton shared by SFT (`bat.train.sft`) and GRPO (`bat.train.grpo`).

`open_block` reads the HF model at `model_path` (loaded in `dtype` = `model.dtype`, LoRA-wrapped with
`cfg.lora.enabled`), builds the DeepSpeed engine in its precision and resumes the newest valid step checkpoint under
`ckpt_root` (its meta checked: dtype, LoRA base); `metrics.jsonl` is reset on a fresh start and truncated after the
restored step on resume. `TrainingBlock.run` calls the trainer's step up to `cfg.steps` (or `stop_after` steps this
call), writes each step's metrics record, a step checkpoint every `cfg.checkpoint_every` steps, at the last step and
at the last step of this call, and the HF export at `export_dir` once all steps are done. A trainer keeps only its
data handling and its loss: `step_fn(step, cursor) -> (next cursor, metrics record or None)`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from bat.config.grpo import GrpoConfig
from bat.config.sft import SftConfig
from bat.state.checkpoints import CheckpointStore
from bat.train.checkpoint import export_hf, load_latest, save_step
from bat.train.common import MetricsLog, peak_memory_mb
from bat.train.engine import DistEnv, build_engine, init_distributed, resolve_precision
from bat.train.lora import AdapterBase, check_resume, wrap_lora

StepFn = Callable[[int, int], tuple[int, "dict[str, Any] | None"]]
"""One optimizer step at 0-based `step` from data position `cursor`; returns the next cursor and the step's metrics
record (None: nothing to log at this step)."""


@dataclass
class TrainingBlock:
    """An open block: the engine and where it stands (`step` optimizer steps done, data `cursor`).

    `kind` ("sft" / "grpo") names the block in checkpoint meta and the export record; `cfg` is its config section
    (steps, optimizer, `checkpoint_every`, `keep_checkpoints`, `deepspeed`, `lora`)."""

    kind: str
    model_path: str
    cfg: SftConfig | GrpoConfig
    seed: int
    dtype: str
    env: DistEnv
    engine: Any
    tokenizer: Any
    accum: int
    base: AdapterBase | None
    store: CheckpointStore
    log: MetricsLog
    step: int = 0
    cursor: int = 0
    started: float = field(default_factory=time.perf_counter)

    @property
    def micro(self) -> int:
        """Sequences per micro-batch on this rank (`deepspeed.micro_batch_per_rank`)."""
        return self.cfg.deepspeed.micro_batch_per_rank

    def resume(self) -> None:
        """Collective: restore the newest valid step checkpoint (engine, RNG, `cursor`; refused when its meta does not
        fit this run) and truncate the metrics log after it; without one, reset the metrics log."""
        check = partial(check_resume, base=self.base)
        restored = load_latest(self.engine, self.store, self.env, check_meta=check, dtype=self.dtype)
        if restored is not None:
            self.step, self.cursor = restored[0], int(restored[1]["cursor"])
            self.log.truncate_after(self.step)
        else:
            self.log.reset()

    def run(
        self,
        step_fn: StepFn,
        *,
        stop_after: int | None,
        export_dir: str | Path,
        meta: dict[str, Any],
        export_extra: dict[str, Any],
    ) -> bool:
        """Run steps up to `cfg.steps` (or `stop_after` this call), writing each returned record to the metrics log
        and the step checkpoints (`meta`: this trainer's extra `meta.json` entries); export once done. Returns
        whether all steps are done. The summary's clock starts here."""
        self.started, ran = time.perf_counter(), 0
        while self.step < self.cfg.steps and (stop_after is None or ran < stop_after):
            self.cursor, record = step_fn(self.step, self.cursor)
            self.step, ran = self.step + 1, ran + 1
            if record is not None:
                self.log.write(record)
            last = self.step == self.cfg.steps or (stop_after is not None and ran == stop_after)
            if self.step % self.cfg.checkpoint_every == 0 or last:
                self.save(meta)
        done = self.step >= self.cfg.steps
        if done:
            extra = {"kind": self.kind, "steps": self.step, **export_extra}
            export_hf(self.engine, self.tokenizer, export_dir, self.env, dtype=self.dtype, extra=extra)
        return done

    def save(self, meta: dict[str, Any]) -> Path:
        """Collective: write step checkpoint `step` (client state: the cursor) with `meta.json` holding kind, cursor,
        seed, dtype, `meta` and the LoRA base (if any); keep the newest `cfg.keep_checkpoints`."""
        lora_meta = self.base.meta() if self.base else {}
        return save_step(
            self.engine,
            self.store,
            self.step,
            self.env,
            client_state={"cursor": self.cursor},
            meta={
                "kind": self.kind,
                "cursor": self.cursor,
                "seed": self.seed,
                "dtype": self.dtype,
                **meta,
                **lora_meta,
            },
            keep=self.cfg.keep_checkpoints,
        )

    def summary(self, done: bool, head: dict[str, Any], tail: dict[str, Any]) -> dict[str, Any]:
        """The trainer's return dict: step, done, `head`, seconds since `run` began, peak memory, engine, `tail`."""
        return {
            "step": self.step,
            "done": done,
            **head,
            "seconds": time.perf_counter() - self.started,
            "peak_memory_mb": peak_memory_mb(),
            "engine": self.engine,
            **tail,
        }


def open_block(
    model_path: str | Path,
    cfg: SftConfig | GrpoConfig,
    *,
    kind: str,
    seed: int,
    dtype: str,
    ckpt_root: str | Path,
    metrics_path: str | Path,
    accum: Callable[[int], int],
    carry_from: str | Path | None = None,
) -> TrainingBlock:
    """Set up and resume a block: distributed init, seed torch, load the policy from `model_path` in `dtype`
    (LoRA-wrapped with `cfg.lora.enabled`, its base digested), build the engine (gradient accumulation `accum(world)`,
    warmup-cosine over `cfg.steps`), then `TrainingBlock.resume` from `ckpt_root` (metrics at `metrics_path`); a
    block with no step of its own yet takes its optimizer state from `carry_from` (`carry_optimizer`) when given."""
    import torch

    from bat.policy.loader import load_policy

    precision = resolve_precision(cfg.deepspeed, dtype, f"{kind}.deepspeed")
    env = init_distributed(cfg.deepspeed)
    torch.manual_seed(seed)
    policy = load_policy(model_path, dtype=dtype)
    model = wrap_lora(policy.model.train(), cfg.lora)
    steps_accum = accum(env.world)
    engine = build_engine(
        model,
        cfg.deepspeed,
        precision=precision,
        lr=cfg.lr,
        weight_decay=cfg.weight_decay,
        grad_clip=cfg.grad_clip,
        grad_accum=steps_accum,
        total_steps=cfg.steps,
        warmup_ratio=cfg.warmup_ratio,
        min_lr_ratio=cfg.min_lr_ratio,
        optimizer=cfg.optimizer if isinstance(cfg, GrpoConfig) else "adamw",
    )
    block = TrainingBlock(
        kind=kind,
        model_path=str(model_path),
        cfg=cfg,
        seed=seed,
        dtype=dtype,
        env=env,
        engine=engine,
        tokenizer=policy.tokenizer,
        accum=steps_accum,
        base=AdapterBase.of(model_path) if cfg.lora.enabled else None,
        store=CheckpointStore(Path(ckpt_root)),
        log=MetricsLog(Path(metrics_path), env.is_main),
    )
    block.resume()
    if carry_from is not None and block.step == 0:
        carry_optimizer(block, Path(carry_from))
    return block


def carry_optimizer(block: TrainingBlock, ckpt_root: Path) -> bool:
    """Collective: give a fresh block the optimizer state of the newest step checkpoint under `ckpt_root` (the
    previous round's block, whose final weights are this block's start), keeping this block's own schedule; returns
    whether a checkpoint was there. The weights it loads with the state are the start checkpoint's own."""
    latest = CheckpointStore(ckpt_root).latest()
    if latest is None:
        return False
    _, path = latest
    loaded, _ = block.engine.load_checkpoint(
        str(path.parent), tag=path.name, load_optimizer_states=True, load_lr_scheduler_states=False
    )
    if loaded is None:
        raise RuntimeError(f"DeepSpeed could not load the optimizer state of {path}")
    return True
