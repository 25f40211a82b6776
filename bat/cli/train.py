"""`bat train sft` and `bat train grpo`: run SFT or one GRPO block alone on given files (resumable);
`bat train lr-probe`: what a finished one-step GRPO round would have given at other learning rates (controller only).

Multi-process: `torchrun --nproc-per-node N -m bat.cli.main train ...` or `srun python -m bat.cli.main train ...`.
Writes under `--out`: `checkpoints/step_NNNNNN/`, `metrics.jsonl`, `export/` (HF safetensors), `summary.json`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from bat.cli.config import add_config_arguments
from bat.config import load_config
from bat.state.atomic import atomic_write_json
from bat.state.train_layout import TrainOutLayout


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("train", help="SFT cold start or a GRPO block on DeepSpeed")
    sub = parser.add_subparsers(dest="train_command", metavar="ACTION", required=True)
    sft = sub.add_parser("sft", help="supervised cold start on SftRow JSONL files (loss on targets only)")
    sft.add_argument("--train", nargs="+", required=True, help="SftRow JSONL files for training")
    sft.add_argument("--val", nargs="*", default=[], help="SftRow JSONL files for validation loss")
    grpo = sub.add_parser("grpo", help="one GRPO block on RolloutRecord + RewardRecord shards")
    grpo.add_argument("--rollouts", nargs="+", required=True, help="RolloutRecord JSONL files")
    grpo.add_argument("--rewards", nargs="+", required=True, help="RewardRecord JSONL files")
    grpo.add_argument(
        "--plan",
        help="round_NN/plan.json whose batches the steps train on (needed with grpo.step_batches=plan, the default)",
    )
    probe = sub.add_parser(
        "lr-probe",
        help="scale a finished one-step GRPO round's update to other learning rates (start + s x step, exact for one "
        "AdamW or SGD step from a fresh optimizer); KL to the start policy and the controller evaluation of each",
    )
    probe.add_argument("--state", required=True, help="the run's state directory")
    probe.add_argument("--round", type=int, required=True, help="round whose one-step GRPO block to scale (>= 1)")
    probe.add_argument(
        "--scales", type=_scales, required=True, help="comma-separated multiples of the round's lr, e.g. 0,1,5,10"
    )
    probe.add_argument("--out", required=True, help="output directory (scaled checkpoints, evaluations, lr_probe.json)")
    probe.add_argument(
        "--kl-only",
        action="store_true",
        help="measure each scale's KL to the start only (seconds per scale), no controller evaluation: a screen "
        "for the scales worth evaluating",
    )
    probe.add_argument(
        "--candidate",
        help="a one-step candidate trained from the round's start checkpoint some other way (`bat train grpo` on the "
        "round's rollouts under other settings) to probe in place of the round's recorded one",
    )
    add_config_arguments(probe)
    probe.set_defaults(handler=_usage_errors(_lr_probe))
    for command, handler in ((sft, _sft), (grpo, _grpo)):
        command.add_argument("--model", required=True, help="local HF model directory to start from")
        command.add_argument("--out", required=True, help="output directory (resumes from its checkpoints)")
        command.add_argument("--seed", type=int, default=None, help="data-order seed (default: run.seed)")
        command.add_argument("--stop-after", type=int, default=None, help="stop after this many steps (testing)")
        add_config_arguments(command)
        command.set_defaults(handler=_usage_errors(handler))


def _scales(text: str) -> list[float]:
    try:
        scales = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--scales takes comma-separated numbers >= 0, got {text!r}") from None
    if not scales or any(s < 0 for s in scales):
        raise argparse.ArgumentTypeError(f"--scales takes comma-separated numbers >= 0, got {text!r}")
    return scales


def _lr_probe(args: argparse.Namespace) -> int:
    """Print one line per scale: lr, KL to the start policy, controller Overall/Task/Agentic and the stage profile."""
    from bat.config.run_record import config_of_run
    from bat.curriculum.lr_probe import probe_round
    from bat.evaluate.aggregate import pct
    from bat.state.layout import RunLayout
    from bat.state.lr_probe_layout import LrProbeLayout

    cfg = config_of_run(args.state, args.config, args.overrides)
    rows = probe_round(
        cfg,
        RunLayout(Path(args.state)),
        args.round,
        args.scales,
        Path(args.out),
        evaluate=not args.kl_only,
        candidate=None if args.candidate is None else Path(args.candidate),
    )
    runs = "KL only" if args.kl_only else f"controller split, {rows[0].n_runs if rows else 0} runs per scale"
    print(f"round {args.round} of {args.state}: {runs}")
    for row in rows:
        kl = "-" if row.kl_to_start is None else f"{row.kl_to_start:.4f}"
        if not row.evaluated:
            print(f"  x{row.scale:<5g} lr {row.lr:.1e}  KL {kl:>7s}")
            continue
        stages = " ".join(f"{k} {pct(v)}" for k, v in sorted(row.stages.items()))
        print(
            f"  x{row.scale:<5g} lr {row.lr:.1e}  KL {kl:>7s}  Overall {pct(row.overall)}  "
            f"Task {pct(row.task)}  Agentic {pct(row.agentic)}  ({stages})"
        )
    print(f"wrote {LrProbeLayout(Path(args.out)).results}")
    return 0


def _usage_errors(handler):
    """Bad input (missing files, corrupt records, impossible batch shapes) -> message + exit 2."""

    def wrapped(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except (FileNotFoundError, ValueError) as exc:
            print(f"bat train: {exc}", file=sys.stderr)
            return 2

    return wrapped


def _finish(out: TrainOutLayout, summary: dict, is_main: bool) -> int:
    """Write the run's summary (rank 0) and return the exit code; a lone process keeps its process group (in-process
    callers reuse it).

    A rank of a multi-process run (torchrun, srun) leaves the group with the others and then ends the process
    itself (`os._exit(0)`, after flushing stdout and stderr): every output is written and closed by then, and the
    interpreter's teardown of the communication and DeepSpeed libraries' native threads aborted finished ranks
    ("terminate called without an active exception", exit -6) in two full test runs beside a long experiment, the
    second after the group was destroyed."""
    import torch.distributed as dist

    clean = {k: v for k, v in summary.items() if isinstance(v, (int, float, str, bool, dict, type(None)))}
    if is_main:
        atomic_write_json(out.summary, clean)
        print(f"step {clean['step']} done={clean['done']} -> {out.root}")
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()
        dist.destroy_process_group()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


def _sft(args: argparse.Namespace) -> int:
    from bat.policy.loader import load_tokenizer
    from bat.policy.tools import benchmark_specs
    from bat.train.sft import train_sft
    from bat.train.sft_data import read_sft_rows, sft_data

    cfg = load_config(args.config, args.overrides)
    out = TrainOutLayout(args.out)
    rows = read_sft_rows(args.train), read_sft_rows(args.val)
    data = sft_data(cfg.sft, *rows, load_tokenizer(args.model), benchmark_specs(cfg))
    seed = cfg.run.seed if args.seed is None else args.seed
    summary = train_sft(
        args.model,
        data,
        cfg.sft,
        seed=seed,
        ckpt_root=out.checkpoints,
        export_dir=out.export,
        metrics_path=out.metrics,
        stop_after=args.stop_after,
        dtype=cfg.model.dtype,
    )
    return _finish(out, summary, summary["engine"].global_rank == 0)


def _grpo(args: argparse.Namespace) -> int:
    from bat.phase.plan import plan_batches, read_plan
    from bat.train.grpo import train_grpo
    from bat.train.grpo_data import grpo_data
    from bat.train.twin import twin_seed

    cfg = load_config(args.config, args.overrides)
    out = TrainOutLayout(args.out)
    seed = cfg.run.seed if args.seed is None else args.seed
    batches, round_index = None, 0
    if cfg.grpo.step_batches == "plan" and not args.plan:
        raise ValueError(
            "grpo.step_batches = 'plan' trains one plan batch per step: pass --plan round_NN/plan.json, "
            "or --set grpo.step_batches=shuffle"
        )
    if args.plan:
        plan = read_plan(args.plan)
        batches, round_index = plan_batches(plan), plan.round
    data = grpo_data(cfg, args.rollouts, args.rewards, batches=batches, twin_seed=twin_seed(cfg.run.seed, round_index))
    summary = train_grpo(
        args.model,
        data,
        cfg.grpo,
        seed=seed,
        ckpt_root=out.checkpoints,
        export_dir=out.export,
        metrics_path=out.metrics,
        stop_after=args.stop_after,
        batches=batches,
        dtype=cfg.model.dtype,
    )
    return _finish(out, summary, summary["engine"].global_rank == 0)
