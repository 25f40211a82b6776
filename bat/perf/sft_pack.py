"""`bat bench sft_pack`: SFT cold-start cost before/after prefix packing and the practice tokenizer corpus.

One run, one practice bank (built in-process in a temporary directory; practice instances only), two tiny
tokenizers of the same preset and seed: `base` (tool language + stdlib docs, the corpus before practice text
was added) and `practice` (the current default corpus). For each it prints tokens per SFT row (tools rendered,
as training does), target share, sequences and tokens per epoch unpacked vs prefix-packed; then it times one
SFT epoch (DeepSpeed, 1 sequence per step) over the rows of the first `--time-trajectories` train trajectories
in all four (corpus, packing) cells, with every ratio against the base/unpacked cell.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

HELP = "SFT tokens/row and epoch time: prefix packing on/off x tokenizer corpus without/with practice text"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tracks", nargs="+", default=["vqa", "classification"], help="bank tracks")
    parser.add_argument("--tasks-per-track", type=int, default=1)
    parser.add_argument("--preset", default="tiny", choices=["tiny", "10m"], help="tiny model shape")
    parser.add_argument("--seed", type=int, default=0, help="tokenizer/model build seed")
    parser.add_argument(
        "--time-trajectories",
        type=int,
        default=1,
        help="time one SFT epoch over the rows of this many train trajectories (0 = skip timing)",
    )


def _bank_rows(tracks: list[str], tasks: int, root: Path) -> list[Any]:
    """SFT rows (train + validation) of a fresh practice bank under `root`."""
    from bat.bank.synthesize import synthesize
    from bat.config import load_config
    from bat.state.layout import RunLayout

    cfg = load_config(
        None,
        [
            f"bank.tracks=[{','.join(tracks)}]",
            f"bank.tasks_per_track={tasks}",
            "benchmark.runtime=inprocess",
            "leakage.enabled=false",
            "bank.sft_max_length=1000000",
        ],
    )
    bank, _ = synthesize(cfg, RunLayout(root / "run"))
    return bank.sft_rows("train") + bank.sft_rows("validation")


def _epoch_seconds(model: Path, examples: list[Any], root: Path) -> float:
    """Wall seconds of the training steps of one SFT epoch (1 sequence per step, DeepSpeed ZeRO-0)."""
    from bat.config.deepspeed import DeepSpeedConfig
    from bat.config.sft import SftConfig
    from bat.state.jsonl import read_jsonl
    from bat.train.sft import train_sft
    from bat.train.sft_data import SftData

    cfg = SftConfig(
        steps=len(examples),
        lr=1e-4,
        global_batch=1,
        checkpoint_every=10**6,
        val_every=10**6,
        deepspeed=DeepSpeedConfig(micro_batch_per_rank=1),
    )
    train_sft(
        model,
        SftData(train=examples, val=[]),
        cfg,
        seed=0,
        ckpt_root=root / "ck",
        export_dir=root / "hf",
        metrics_path=root / "m.jsonl",
    )
    return sum(m["tokens"] / m["tokens_per_s"] for m in read_jsonl(root / "m.jsonl") if "loss" in m)


def run(args: argparse.Namespace) -> int:
    import torch  # noqa: F401  (imported before the build timers start)
    import transformers  # noqa: F401
    from rich.console import Console

    from bat.config.model import TINY_PRESETS
    from bat.policy.corpus import tokenizer_corpus
    from bat.policy.loader import load_tokenizer
    from bat.policy.tiny import build_tiny_model
    from bat.train.sft_data import encode_rows
    from bat.train.sft_pack import pack_prefixes

    console = Console(width=160)
    figures: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bat-bench-sftpack-") as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        rows = _bank_rows(args.tracks, args.tasks_per_track, root)
        bank_s = time.perf_counter() - started
        timed_ids = sorted({r.trajectory_id for r in rows if r.split == "train"})[: args.time_trajectories]
        for name, practice in (("base", False), ("practice", True)):
            t0 = time.perf_counter()
            corpus = tokenizer_corpus(seed=args.seed, practice=practice)
            model = build_tiny_model(root / name, TINY_PRESETS[args.preset], seed=args.seed, corpus=corpus)
            build_s = time.perf_counter() - t0
            examples, _ = encode_rows(rows, load_tokenizer(model), 10**9)
            packed, counts = pack_prefixes(examples)
            figures[name] = counts | {
                "build_s": build_s,
                "model": model,
                "timed_rows": [e for e in examples if e.group in timed_ids],
                "timed_packed": [e for e in packed if e.group in timed_ids],
            }
        if timed_ids:
            for name, fig in figures.items():
                for mode in ("rows", "packed"):
                    fig[f"epoch_{mode}"] = _epoch_seconds(fig["model"], fig[f"timed_{mode}"], root / f"t-{name}-{mode}")
    console.print(_token_table(figures, len(rows), bank_s, args))
    if timed_ids:
        console.print(_time_table(figures, timed_ids))
    return 0


def _token_table(figures: dict[str, dict[str, Any]], n_rows: int, bank_s: float, args: argparse.Namespace) -> Any:
    from rich.table import Table

    table = Table(
        title=f"bat bench sft_pack: {n_rows} SFT rows of a practice bank ({', '.join(args.tracks)}, "
        f"{args.tasks_per_track} task(s)/track, built in {bank_s:.1f} s), preset {args.preset}, "
        "tools rendered"
    )
    for column in (
        "corpus",
        "build s",
        "tokens/row",
        "target tok/row",
        "target %",
        "sequences",
        "epoch tokens rows",
        "epoch tokens packed",
        "packed/rows",
        "tokens/row vs base",
    ):
        table.add_column(column, justify="right")
    base = figures["base"]["tokens_unpacked"]
    for name, f in figures.items():
        share = 100 * f["target_tokens"] / f["tokens_unpacked"]
        table.add_row(
            name,
            f"{f['build_s']:.1f}",
            f"{f['tokens_unpacked'] / f['rows']:,.0f}",
            f"{f['target_tokens'] / f['rows']:,.1f}",
            f"{share:.2f}",
            f"{f['sequences']} / {f['rows']}",
            f"{f['tokens_unpacked']:,}",
            f"{f['tokens_packed']:,}",
            f"{f['tokens_packed'] / f['tokens_unpacked']:.3f}",
            f"{f['tokens_unpacked'] / base:.3f}",
        )
    return table


def _time_table(figures: dict[str, dict[str, Any]], timed_ids: list[str]) -> Any:
    from rich.table import Table

    table = Table(
        title=f"one SFT epoch (DeepSpeed, 1 sequence/step) over the rows of {len(timed_ids)} train "
        f"trajectory(ies): {', '.join(timed_ids)}"
    )
    for column in (
        "corpus",
        "packing",
        "rows",
        "sequences",
        "tokens",
        "target tokens",
        "epoch s",
        "target tok/s",
        "speed-up vs base/rows",
    ):
        table.add_column(column, justify="right")
    reference = figures["base"]["epoch_rows"]
    for name, f in figures.items():
        for mode in ("rows", "packed"):
            examples = f[f"timed_{mode}"]
            seconds = f[f"epoch_{mode}"]
            target = sum(sum(e.mask[1:]) for e in examples)
            table.add_row(
                name,
                "on" if mode == "packed" else "off",
                str(sum(e.rows for e in examples)),
                str(len(examples)),
                f"{sum(len(e.ids) for e in examples):,}",
                f"{target:,}",
                f"{seconds:.1f}",
                f"{target / seconds:,.1f}",
                f"{reference / seconds:.2f}x",
            )
    return table
