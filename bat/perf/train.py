"""`bat bench train`: SFT and GRPO training throughput (tokens/s) and peak memory for the tiny and ~10M models
and the named pretrained policies (`--presets smollm2-135m-instruct`, converted once into the model cache).

Each (preset, mode) runs in its own spawned process (so peak memory is per configuration) on synthetic
token rows of `--seq-len` tokens; the first step (warm-up) is excluded from the throughput. Beside the
DeepSpeed SFT figure the same step in plain PyTorch (HF model + AdamW) is timed, giving the engine's
overhead ratio in the same run. Peak memory is the process's max RSS (CPU) or max CUDA allocation (GPU).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import random
import socket
import tempfile
from pathlib import Path
from typing import Any

HELP = "SFT and GRPO training tokens/s and peak memory for the tiny and ~10M-parameter models"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from bat.policy.pretrained import REGISTRY

    parser.add_argument(
        "--presets",
        nargs="+",
        default=["tiny", "10m"],
        choices=["tiny", "10m", *sorted(REGISTRY)],
        help="tiny shapes built here, or registered pretrained models",
    )
    parser.add_argument("--modes", nargs="+", default=["sft", "grpo"], choices=["sft", "grpo"])
    parser.add_argument("--steps", type=int, default=4, help="optimizer steps per run (first is warm-up)")
    parser.add_argument("--batch", type=int, default=8, help="rows per optimizer step")
    parser.add_argument("--micro", type=int, default=4, help="rows per micro-batch")
    parser.add_argument("--seq-len", type=int, default=512, help="tokens per row")
    parser.add_argument("--zero-stage", type=int, default=0, choices=[0, 1, 2, 3])
    parser.add_argument(
        "--target-fraction",
        type=float,
        default=0.25,
        help="trained share of each row (the last tokens; SFT targets / generated GRPO tokens)",
    )
    parser.add_argument(
        "--logits",
        nargs="+",
        default=["targets"],
        choices=["targets", "all"],
        help="vocabulary logits at trained positions only, or at every position (both: side by side)",
    )
    parser.add_argument(
        "--kl-references",
        nargs="+",
        default=["behavior", "checkpoint"],
        choices=["behavior", "checkpoint"],
        help="grpo.kl_reference of the GRPO runs: the rollouts' behavior log-probs, or a forward of the frozen "
        "start checkpoint (both: side by side)",
    )
    parser.add_argument(
        "--prompts",
        nargs="+",
        default=["shared", "full"],
        choices=["shared", "full"],
        help="grpo.share_prompts of the GRPO runs (each group of 4 rows shares its untrained prefix): computed once "
        "per micro-batch, or once per row (both: side by side)",
    )
    parser.add_argument(
        "--checkpointing",
        nargs="+",
        default=["off"],
        choices=["off", "on"],
        help="deepspeed.activation_checkpointing (each decoder layer's activations recomputed in the backward "
        "instead of kept; both: side by side)",
    )
    parser.add_argument(
        "--no-plain",
        dest="plain",
        action="store_false",
        help="skip the plain-PyTorch SFT step measured beside DeepSpeed",
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _plain_torch_rate(
    model_dir: Path, rows: list[list[int]], batch: int, micro: int, steps: int, cut: int, targets_only: bool
) -> float:
    """Tokens/s of the same SFT step (targets from position `cut` on) in plain PyTorch (HF model + AdamW, no
    DeepSpeed); first step excluded."""
    import statistics
    import time

    import torch

    from bat.policy.loader import load_model
    from bat.train.losses import target_logprobs

    model = load_model(model_dir).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.tensor(rows[:batch])
    rates = []
    for _ in range(steps):
        start = time.perf_counter()
        for part in ids.split(micro):
            mask = torch.zeros_like(part[:, 1:])
            mask[:, cut - 1 :] = 1
            logp = target_logprobs(model, part, torch.ones_like(part), mask, targets_only=targets_only)
            (-(logp * mask).sum() / mask.sum()).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        rates.append(ids.numel() / (time.perf_counter() - start))
    return statistics.median(rates[1:]) if len(rates) > 1 else rates[0]


def _bench_model(preset: str, root: Path) -> tuple[Path, int, int]:
    """(model directory, vocabulary to draw ids from, parameter count): a tiny preset built under `root`, or a
    registered pretrained model imported into the model cache (its ordinary ids: the first 32,000)."""
    from bat.config.model import TINY_PRESETS
    from bat.policy.tiny import build_tiny_model
    from bat.state.model_files import read_build_info

    if preset in TINY_PRESETS:
        model = build_tiny_model(root / "model", TINY_PRESETS[preset], seed=0)
        return model, TINY_PRESETS[preset].vocab_size, read_build_info(model)["parameters"]
    from bat.policy.pretrained import import_pretrained, read_record
    from bat.state.layout import pretrained_model_dir

    model = import_pretrained(preset, pretrained_model_dir(preset))
    return model, 32_000, read_record(model)["parameters"]


def _train_bench(
    model: Path, mode: str, ids: list[list[int]], cut: int, args: dict[str, Any], port: int, root: Path
) -> dict[str, Any]:
    """Train `args["steps"]` steps of `mode` (sft or grpo) on the rows `ids` (targets from position `cut` on),
    writing checkpoints, the export and `root/m.jsonl` under `root`; returns the trainer's summary."""
    from bat.config.deepspeed import DeepSpeedConfig
    from bat.config.grpo import GrpoConfig
    from bat.config.sft import SftConfig
    from bat.train.grpo import train_grpo
    from bat.train.grpo_data import GrpoData, GrpoItem
    from bat.train.sft import train_sft
    from bat.train.sft_data import Example, SftData

    ds = DeepSpeedConfig(
        micro_batch_per_rank=args["micro"],
        zero_stage=args["zero_stage"],
        master_port=port,
        activation_checkpointing=args["checkpointing"] == "on",
    )
    length, targets_only = args["seq_len"], args["logits"] == "targets"
    mask = [0] * cut + [1] * (length - cut)
    common = dict(seed=0, ckpt_root=root / "ck", export_dir=root / "hf", metrics_path=root / "m.jsonl")
    if mode == "sft":
        data = SftData(train=[Example(i, list(mask), "g") for i in ids], val=[])
        cfg = SftConfig(
            steps=args["steps"],
            lr=1e-4,
            global_batch=args["batch"],
            checkpoint_every=10**6,
            val_every=10**6,
            deepspeed=ds,
            target_logits_only=targets_only,
        )
        return train_sft(model, data, cfg, **common)
    items = [
        GrpoItem(
            f"r{k}", f"s{k // 4}", "S-target", i, list(mask), [-2.0] * length, 1.0, float(k % 2), 1.0 if k % 2 else -1.0
        )
        for k, i in enumerate(ids)
    ]
    cfg = GrpoConfig(
        steps=args["steps"],
        lr=1e-5,
        step_batches="plan",
        kl_reference=args["kl_reference"],
        checkpoint_every=10**6,
        deepspeed=ds,
        target_logits_only=targets_only,
        share_prompts=args["prompts"] == "shared",
    )
    groups = list(dict.fromkeys(i.state_id for i in items))
    per_step = max(1, args["batch"] // 4)  # a step trains whole groups of 4, contiguous (as a round plan's batch)
    batches = [groups[i : i + per_step] for i in range(0, len(groups), per_step)]
    return train_grpo(model, GrpoData(items=items), cfg, batches=batches, **common)


def _worker(preset: str, mode: str, args: dict[str, Any], port: int, queue: Any) -> None:
    """Child process: build the model, train `steps` steps on synthetic rows, report the figures."""
    import statistics

    from bat.state.jsonl import read_jsonl

    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model, vocab, parameters = _bench_model(preset, root)
        n, length = args["batch"] * 2, args["seq_len"]
        ids = [[rng.randrange(vocab) for _ in range(length)] for _ in range(n)]
        cut = length - max(1, round(length * args["target_fraction"]))
        for k in range(n):  # the 4 rows of a GRPO group share their prompt (the untrained prefix)
            ids[k][:cut] = ids[k - k % 4][:cut]
        out = _train_bench(model, mode, ids, cut, args, port, root)
        rates = [m["tokens_per_s"] for m in read_jsonl(root / "m.jsonl") if "tokens_per_s" in m][1:]
        targets_only = args["logits"] == "targets"
        plain = (
            _plain_torch_rate(model, ids, args["batch"], args["micro"], args["steps"], cut, targets_only)
            if mode == "sft" and args["plain"]
            else float("nan")
        )
        label = mode if mode == "sft" else f"grpo, {args['kl_reference']} ref, {args['prompts']} prompts"
        queue.put(
            {
                "plain_tokens_per_s": plain,
                "preset": preset,
                "mode": label + (", activation ckpt" if args["checkpointing"] == "on" else ""),
                "parameters": parameters,
                "logits": args["logits"],
                "tokens_per_s": statistics.median(rates) if rates else float("nan"),
                "step_s": args["batch"] * length / statistics.median(rates) if rates else float("nan"),
                "peak_mb": out["peak_memory_mb"],
            }
        )


TABLE_COLUMNS = (
    "preset",
    "parameters",
    "mode",
    "logits",
    "tokens/s",
    "s/step",
    "peak MiB",
    "plain torch tok/s",
    "DS/plain",
)


def run(args: argparse.Namespace) -> int:
    """Run every (preset, mode, KL reference, logits) configuration in its own spawned process, print the table
    and the ratios; 1 when a worker fails."""
    from rich.console import Console
    from rich.table import Table

    settings = {
        k: getattr(args, k) for k in ("steps", "batch", "micro", "seq_len", "zero_stage", "plain", "target_fraction")
    }
    table = Table(
        title=f"bat bench train: {args.batch} rows x {args.seq_len} tokens per step, ZeRO-{args.zero_stage}, "
        f"{args.steps} steps (first excluded), {args.target_fraction:.0%} of each row trained"
    )
    for column in TABLE_COLUMNS:
        table.add_column(column, justify="right")
    rates: dict[tuple[str, str, str], dict[str, Any]] = {}
    runs = [
        (mode, ref, prompts, checkpointing)
        for mode in args.modes
        for ref in (args.kl_references if mode == "grpo" else ["behavior"])
        for prompts in (args.prompts if mode == "grpo" else ["full"])
        for checkpointing in args.checkpointing
    ]
    for preset in args.presets:
        for mode, ref, prompts, checkpointing in runs:
            for logits in args.logits:
                varied = {"logits": logits, "kl_reference": ref, "prompts": prompts, "checkpointing": checkpointing}
                r = _run_worker(preset, mode, settings | varied)
                if r is None:
                    return 1
                rates[preset, r["mode"], logits] = r
                table.add_row(*_table_row(preset, logits, r))
    console = Console(width=140)
    console.print(table)
    _print_ratios(console, rates)
    return 0


def _run_worker(preset: str, mode: str, settings: dict[str, Any]) -> dict[str, Any] | None:
    """The figures of one configuration, measured by `_worker` in a spawned process; None (and a message) when
    the process fails."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_worker, args=(preset, mode, settings, _free_port(), queue))
    proc.start()
    proc.join()
    if proc.exitcode != 0:
        print(f"bench worker {preset}/{mode}/{settings['logits']} failed with exit code {proc.exitcode}")
        return None
    return queue.get()


def _table_row(preset: str, logits: str, r: dict[str, Any]) -> list[str]:
    """The table cells of one configuration's figures (`-` for the plain-torch columns when not measured)."""
    plain = r["plain_tokens_per_s"]
    return [
        preset,
        f"{r['parameters']:,}",
        r["mode"],
        logits,
        f"{r['tokens_per_s']:,.0f}",
        f"{r['step_s']:.2f}",
        f"{r['peak_mb']:,.0f}",
        "-" if plain != plain else f"{plain:,.0f}",
        "-" if plain != plain else f"{r['tokens_per_s'] / plain:.2f}",
    ]


def _print_ratios(console: Any, rates: dict[tuple[str, str, str], dict[str, Any]]) -> None:
    """Print target-only vs all-position logits (throughput, memory) and GRPO vs SFT step throughput, for every
    pair of configurations measured side by side."""
    for (preset, mode, logits), r in rates.items():
        if logits == "targets" and (preset, mode, "all") in rates:
            full = rates[preset, mode, "all"]
            console.print(
                f"{preset} {mode}: target-only / all-position logits: "
                f"{r['tokens_per_s'] / full['tokens_per_s']:.2f}x tokens/s, "
                f"{r['peak_mb'] / full['peak_mb']:.2f}x peak memory"
            )
    for (preset, mode, logits), r in rates.items():
        full = (preset, mode.replace("shared prompts", "full prompts"), logits)
        if mode.endswith("shared prompts") and full in rates:
            console.print(
                f"{preset} {mode.removesuffix(', shared prompts')} ({logits} logits): shared / full prompts: "
                f"{r['tokens_per_s'] / rates[full]['tokens_per_s']:.2f}x tokens/s, "
                f"{r['peak_mb'] / rates[full]['peak_mb']:.2f}x peak memory"
            )
    for (preset, mode, logits), r in rates.items():
        kept = (preset, mode.removesuffix(", activation ckpt"), logits)
        if mode.endswith(", activation ckpt") and kept in rates:
            console.print(
                f"{preset} {kept[1]} ({logits} logits): activation checkpointing on / off: "
                f"{r['tokens_per_s'] / rates[kept]['tokens_per_s']:.2f}x tokens/s, "
                f"{r['peak_mb'] / rates[kept]['peak_mb']:.2f}x peak memory"
            )
    for (preset, mode, logits), r in rates.items():
        if mode.startswith("grpo") and (preset, "sft", logits) in rates:
            sft = rates[preset, "sft", logits]
            console.print(
                f"{preset} ({logits} logits, KL {mode.removeprefix('grpo, ')}): grpo / plain fine-tune (sft) step "
                f"tokens/s: {r['tokens_per_s'] / sft['tokens_per_s']:.2f}x"
            )
