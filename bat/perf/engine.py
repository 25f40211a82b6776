"""`bat bench engine`: generation and prefill tokens/s of the `hf` and `vllm` engines on the same prompts.

One run builds each engine on the same checkpoint (the registered pretrained policy by default), then, with
the same seeded prompts for both, measures: generation at each batch size (every request generates exactly
`--new-tokens` tokens: no stop ids), prefill of one `--prefill-tokens` prompt (one generated token), and the
engine's start-up (hf: load the weights; vllm: start its server and wait until it serves the checkpoint).
Prompts differ between measurements, so no prefix cache helps either engine. Each engine gets one untimed
warm-up request first. The last line is `vllm / hf generate at batch 32: N.NNx`.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

HELP = "hf vs vllm engine: generate tokens/s at batch 1/8/32 and prefill tokens/s on the same prompts"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        default="smollm2-135m-instruct",
        help="registered pretrained policy or local HF folder (default smollm2-135m-instruct)",
    )
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32], help="batch sizes (default 1 8 32)")
    parser.add_argument("--new-tokens", type=int, default=128, help="tokens generated per request (default 128)")
    parser.add_argument(
        "--prompt-tokens",
        type=int,
        default=32,
        help="prompt length for generation (default 32: decode, not prefill, dominates)",
    )
    parser.add_argument("--prefill-tokens", type=int, default=2048, help="prompt length for prefill (default 2048)")
    parser.add_argument(
        "--engines", nargs="+", choices=("hf", "vllm"), default=["hf", "vllm"], help="engines to measure (default both)"
    )


def resolve_model(name: str) -> Path:
    """A registered pretrained policy (converted once into the model cache) or a local folder."""
    from bat.policy.pretrained import REGISTRY

    if name in REGISTRY:
        from bat.policy.pretrained import import_pretrained
        from bat.state.layout import pretrained_model_dir

        return import_pretrained(name, pretrained_model_dir(name))
    return Path(name)


def prompts(count: int, length: int, vocab: int, seed: int) -> list[list[int]]:
    """`count` prompts of `length` token ids drawn (seeded) from the ordinary vocabulary (ids >= 100)."""
    import random

    rng = random.Random(seed)
    return [[rng.randrange(100, vocab) for _ in range(length)] for _ in range(count)]


def build_engine(kind: str, model: Path) -> Any:
    """The engine `kind` on `model` (CPU, fp32, no prefix cache for hf; vllm as a managed server)."""
    if kind == "hf":
        from bat.rollout.engine_hf import HFEngine

        return HFEngine(model, max_batch=1024)
    from bat.config.rollout import VllmEngineConfig
    from bat.rollout.engine_vllm import VllmServerEngine

    return VllmServerEngine(model, VllmEngineConfig(max_num_seqs=256, enforce_eager=True))


def timed(engine: Any, batch: list[list[int]], new_tokens: int) -> tuple[int, float]:
    """(generated tokens, seconds) of one batched generate of `batch` (no stop ids: exactly `new_tokens` each)."""
    from bat.rollout.engine import GenRequest

    reqs = [
        GenRequest(prompt_ids=p, max_new_tokens=new_tokens, seed=i, temperature=1.0, stop_ids=())
        for i, p in enumerate(batch)
    ]
    t0 = time.perf_counter()
    out = engine.generate(reqs)
    seconds = time.perf_counter() - t0
    return sum(len(r.token_ids) for r in out), seconds


def measure(kind: str, model: Path, args: argparse.Namespace, vocab: int) -> dict[str, tuple[int, float]]:
    """Every figure of one engine: start, warm-up excluded, generation per batch size, prefill."""
    t0 = time.perf_counter()
    engine = build_engine(kind, model)
    figures: dict[str, tuple[int, float]] = {"start": (0, time.perf_counter() - t0)}
    try:
        timed(engine, prompts(1, 16, vocab, seed=7), 4)  # warm-up
        for size in args.batches:
            figures[f"generate, batch {size}"] = timed(
                engine, prompts(size, args.prompt_tokens, vocab, seed=1000 + size), args.new_tokens
            )
        _, seconds = timed(engine, prompts(1, args.prefill_tokens, vocab, seed=99), 1)
        figures[f"prefill {args.prefill_tokens} tokens"] = (args.prefill_tokens, seconds)
    finally:
        engine.close()
    return figures


def run(args: argparse.Namespace) -> int:
    """Measure each engine alone, in turn, and print one table with the ratios."""
    import json

    from rich.console import Console
    from rich.table import Table

    from bat.policy.loader import ModelFolderError

    try:
        model = resolve_model(args.model)
        vocab = int(json.loads((model / "config.json").read_text(encoding="utf-8"))["vocab_size"])
    except (OSError, KeyError, ValueError, ModelFolderError) as exc:
        print(f"bat bench engine: cannot use model {args.model!r}: {exc}")
        return 2
    results = {kind: measure(kind, model, args, vocab) for kind in args.engines}
    rows = [f"generate, batch {b}" for b in args.batches] + [f"prefill {args.prefill_tokens} tokens"]
    table = Table(
        title=f"engine throughput on {model.name}: {args.prompt_tokens}-token prompts, "
        f"{args.new_tokens} new tokens per request"
    )
    table.add_column("what")
    for kind in args.engines:
        table.add_column(f"{kind} tokens/s", justify="right")
    if len(args.engines) == 2:
        table.add_column("vllm / hf", justify="right")
    for row in rows:
        rates = [results[k][row][0] / results[k][row][1] for k in args.engines]
        cells = [f"{r:.1f}" for r in rates] + ([f"{rates[1] / rates[0]:.2f}x"] if len(rates) == 2 else [])
        table.add_row(row, *cells)
    table.add_row(
        "engine start (s)",
        *[f"{results[k]['start'][1]:.1f}" for k in args.engines],
        *([""] if len(args.engines) == 2 else []),
    )
    console = Console(width=120)
    console.print(table)
    if len(args.engines) == 2 and 32 in args.batches:
        key = "generate, batch 32"
        hf, vl = (results[k][key][0] / results[k][key][1] for k in ("hf", "vllm"))
        console.print(f"vllm / hf generate at batch 32: {vl / hf:.2f}x")
    return 0
