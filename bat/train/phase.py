"""Phase functions `sft` (bootstrap round) and `grpo` (every round r >= 1): `def run(ctx) -> PhaseResult`.

sft  reads the newest admitted bank's SFT rows and the base model (`model.path`, or the tiny model built
     under `models/tiny` on first use); writes step checkpoints under `checkpoints/sft/`, the HF export
     `layout.candidate_model(0)` and `round_00/sft/metrics.jsonl`.
grpo (`bat.online.phase.GRPO`, online blocks in `bat.online`) reads `round_NN/plan.json` (start checkpoint), finished rollout shards
     (`round_NN/rollout/shard_*/rollouts.jsonl`) and reward shards (`round_NN/verify/shard_*/rewards.jsonl`);
     writes step checkpoints under `checkpoints/round_NN/`, the candidate `layout.candidate_model(NN)` and
     `round_NN/grpo/metrics.jsonl`. Both resume from their newest valid step checkpoint and record in their DONE.json
     (`extra.kernels`) what selected their CPU kernels (`bat.perf.numerics.kernel_environment`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bat.phase.context import PhaseContext, PhaseResult
from bat.phase.plan import carried_optimizer, load_plan, plan_batches, resolve_checkpoint
from bat.phase.spec import PhaseSpec, first_bank
from bat.state.round_layout import all_shards, finished_shard_files
from bat.train.kernels import kernel_environment

_SUMMARY_DROP = ("engine", "tokenizer", "last")


def base_model_path(ctx: PhaseContext) -> Path:
    """The run's base policy folder (`bat.policy.base.base_model_dir`: pretrained, `model.path` or tiny)."""
    from bat.policy.base import base_model_dir

    return base_model_dir(ctx.config.model, ctx.layout, seed=ctx.config.run.seed)


def _summary(summary: dict[str, Any]) -> dict[str, int | float]:
    return {
        k: v for k, v in summary.items() if k not in _SUMMARY_DROP and isinstance(v, (int, float)) and v is not None
    }


def run_sft(ctx: PhaseContext) -> PhaseResult:
    """Cold-start SFT on the admitted bank's SFT rows; returns the export as `extra["candidate"]`."""
    from bat.bank.store import open_bank
    from bat.policy.loader import load_tokenizer
    from bat.policy.tools import benchmark_specs
    from bat.train.sft import train_sft
    from bat.train.sft_data import sft_data

    cfg, layout = ctx.config, ctx.layout
    base = base_model_path(ctx)
    bank = open_bank(layout)
    rows = bank.sft_rows("train"), bank.sft_rows("validation")
    data = sft_data(cfg.sft, *rows, load_tokenizer(base), benchmark_specs(cfg))
    export = layout.candidate_model(0)
    metrics = ctx.layout.training_metrics(ctx.round, ctx.phase)
    summary = train_sft(
        base,
        data,
        cfg.sft,
        seed=ctx.seed("data"),
        ckpt_root=layout.sft_checkpoints,
        export_dir=export,
        metrics_path=metrics,
        dtype=cfg.model.dtype,
    )
    return PhaseResult(
        outputs=[export, metrics],
        inputs=[bank.path, base],
        counts=_summary(summary),
        extra={
            "candidate": str(export),
            "base_model": str(base),
            "bank_version": bank.version,
            "first_val_loss": summary["first_val_loss"],
            "val_loss": summary["val_loss"],
            "kernels": kernel_environment(),
        },
    )


def run_grpo(ctx: PhaseContext) -> PhaseResult:
    """One GRPO block from the plan's start checkpoint; returns the candidate as `extra["candidate"]`."""
    from bat.train.grpo import train_grpo
    from bat.train.grpo_data import grpo_data
    from bat.train.twin import twin_seed

    cfg, layout = ctx.config, ctx.layout
    plan = load_plan(layout, ctx.round)
    start = resolve_checkpoint(layout, plan.start_checkpoint)
    round_files = layout.round(ctx.round)
    rollout_files, open_rollouts = finished_shard_files(all_shards(round_files.phase("rollout")), lambda s: s.rollouts)
    reward_files, open_rewards = finished_shard_files(all_shards(round_files.phase("verify")), lambda s: s.rewards)
    if not rollout_files or not reward_files:
        raise FileNotFoundError(
            f"round {ctx.round}: no finished rollout ({len(rollout_files)}) or reward "
            f"({len(reward_files)}) shards under {layout.round_dir(ctx.round)}"
        )
    data = grpo_data(
        cfg, rollout_files, reward_files, batches=plan_batches(plan), twin_seed=twin_seed(cfg.run.seed, ctx.round)
    )
    export = layout.candidate_model(ctx.round)
    metrics = ctx.layout.training_metrics(ctx.round, ctx.phase)
    summary = train_grpo(
        start,
        data,
        cfg.grpo,
        seed=ctx.seed("data"),
        ckpt_root=layout.round_checkpoints(ctx.round),
        export_dir=export,
        metrics_path=metrics,
        batches=plan_batches(plan),
        dtype=cfg.model.dtype,
        carry_from=carried_optimizer(layout, ctx.round, start, cfg.grpo.carry_optimizer),
    )
    counts = _summary(summary) | {"unfinished_rollout_shards": open_rollouts, "unfinished_reward_shards": open_rewards}
    return PhaseResult(
        outputs=[export, metrics],
        inputs=[*rollout_files, *reward_files, start],
        counts=counts,
        extra={
            "candidate": str(export),
            "start_checkpoint": str(start),
            "last_step": summary["last"],
            "kernels": kernel_environment(),
        },
    )


SFT = PhaseSpec(
    "sft",
    run_sft,
    reads=lambda L, r: (first_bank(L).sft_split("train"), first_bank(L).sft_split("validation"), "base model"),
    writes=lambda L, r: (L.sft_checkpoints, L.candidate_model(0), L.training_metrics(0, "sft")),
    resources="sft",
)
