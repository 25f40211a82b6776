"""`bat bench evaluate`: held-out evaluation throughput, side by side.

* scripted expert: runs/s with the `inprocess` tool runtime vs the configured `sandbox` runtime;
* policy (tiny HF model, or `--checkpoint`): runs/s driving runs one at a time vs in lockstep batches
  (`evaluate.parallel_runs`), which is what the evaluate phase does;
* aggregation: milliseconds to aggregate a 7 x 10 suite.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

HELP = "held-out evaluation throughput: runtimes, batched policy runs, aggregation"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tracks", nargs="+", default=["classification", "vqa"], help="tracks of the suite")
    parser.add_argument("--repeats", type=int, default=2, help="repeats per track")
    parser.add_argument("--checkpoint", help="HF checkpoint for the policy figures (default: build the tiny model)")
    parser.add_argument("--batch", type=int, default=4, help="runs in lockstep for the batched policy figure")
    parser.add_argument("--new-tokens", type=int, default=24, help="tokens per assistant turn (policy figures)")
    parser.add_argument("--turns", type=int, default=3, help="assistant turns per run (policy figures)")


def _timed(cfg, root: Path, name: str, checkpoint: str, driver) -> tuple[float, object]:
    from bat.evaluate.runner import evaluate_split
    from bat.state.layout import RunLayout

    layout = RunLayout(root / name).ensure()
    start = time.perf_counter()
    agg, _ = evaluate_split(cfg, layout, 0, "controller", checkpoint, driver, config_hash="bench")
    return time.perf_counter() - start, agg


def _aggregation_ms() -> float:
    from bat.config.stages import builtin_stages
    from bat.evaluate.aggregate import aggregate_runs
    from bat.schemas.evaluation import EvalRun

    keys = tuple(s.key for s in builtin_stages())

    runs = [
        EvalRun(
            run_id=f"{t}-{r}",
            split="controller",
            track=f"t{t}",
            repeat=r,
            seed=r,
            stages={k: ((t + r + i) % 3) / 2 for i, k in enumerate(keys, 1)},
            task=0.5,
            agentic=0.5,
            overall=0.5,
        )
        for t in range(7)
        for r in range(10)
    ]
    start = time.perf_counter()
    for _ in range(20):
        aggregate_runs(
            runs,
            stage_keys=keys,
            round_index=0,
            checkpoint="c",
            checkpoint_digest="d",
            suite_version="s",
            harness_version="h",
            manifest_digest="m",
        )
    return (time.perf_counter() - start) / 20 * 1000


def run(args: argparse.Namespace) -> int:
    from bat.config import parse_config
    from bat.evaluate.episodes import policy_driver, scripted_driver

    base = {"benchmark": {"tracks": args.tracks, "repeats": args.repeats}}
    n = len(args.tracks) * args.repeats
    with tempfile.TemporaryDirectory(prefix="bat-bench-eval-") as tmp:
        root = Path(tmp)
        rows = []
        for runtime in ("inprocess", "sandbox"):
            cfg = parse_config({"benchmark": {**base["benchmark"], "runtime": runtime}})
            seconds, agg = _timed(cfg, root, f"scripted-{runtime}", "scripted:expert", scripted_driver("expert"))
            rows.append((f"scripted expert, {runtime}", seconds, n / seconds, agg.overall))
        budgets = {
            "max_new_tokens_per_turn": args.new_tokens,
            "max_assistant_turns": args.turns,
            "max_tool_calls": args.turns,
        }
        checkpoint = Path(args.checkpoint) if args.checkpoint else None
        if checkpoint is None:
            from bat.policy.tiny import build_tiny_model

            checkpoint = build_tiny_model(root / "tiny", parse_config({}).model.tiny, 0)
        for batch in (1, args.batch):
            cfg = parse_config(
                {
                    "benchmark": {**base["benchmark"], "runtime": "inprocess"},
                    "rollout": {"budgets": budgets},
                    "evaluate": {"parallel_runs": batch},
                }
            )
            driver, close = policy_driver(cfg, checkpoint)
            try:
                seconds, agg = _timed(cfg, root, f"policy-{batch}", str(checkpoint), driver)
            finally:
                close()
            rows.append((f"policy {checkpoint.name}, {batch} run(s) in lockstep", seconds, n / seconds, agg.overall))
    print(f"held-out evaluation, {n} runs ({len(args.tracks)} tracks x {args.repeats} repeats)")
    for label, seconds, rate, overall in rows:
        print(f"  {label:<45} {seconds:7.2f} s  {rate:6.2f} runs/s  Overall {100 * (overall or 0):5.1f}")
    print(f"  sandbox / inprocess time ratio: {rows[1][1] / rows[0][1]:.2f}x")
    print(f"  batched ({args.batch}) policy speed-up over 1-at-a-time: {rows[2][1] / rows[3][1]:.2f}x")
    print(f"  aggregation of a 7 x 10 suite: {_aggregation_ms():.2f} ms")
    return 0
