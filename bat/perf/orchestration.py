"""`bat bench orchestration`: orchestration overhead of a smoke round, local Slurm vs the local executor.

For each executor the same round(s) run in a fresh state dir; overhead = wall time of the round minus
the sum of the phases' own compute times (`compute_s` in each DONE.json), also as a fraction of wall.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

HELP = "orchestration overhead of a smoke round: local Slurm vs local executor (wall - phase compute)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default="configs/smoke.yaml", help="config of the round (default smoke)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--rounds", type=int, default=0, help="round budget: 0 = the bootstrap round only")
    parser.add_argument("--executors", default="slurm,local", help="comma list of slurm, local, debug")
    parser.add_argument("--keep", default=None, help="keep the state dirs under this folder")


def measure(config, root: Path) -> dict[str, float]:
    """Run/queue every round of `config` in `root`, wait, and return wall, compute and overhead seconds."""
    from bat.orchestrate.driver import run, wait_slurm
    from bat.orchestrate.executors import executor_kind
    from bat.state.layout import RunLayout
    from bat.state.markers import DONE_NAME, read_done

    layout = RunLayout(root)
    started = time.perf_counter()
    code = run(config, layout)
    if code == 0 and executor_kind(config) == "slurm":
        code = wait_slurm(config, layout, timeout_s=3600)
    wall = time.perf_counter() - started
    if code != 0:
        raise RuntimeError(f"round failed under {config.orchestrate.executor} (exit {code}); see {root}/events.log")
    dones = [read_done(p.parent) for p in sorted(root.glob(f"round_*/*/{DONE_NAME}"))]
    compute = sum(float(d.extra.get("compute_s", 0.0)) for d in dones if d is not None)
    return {
        "phases": len(dones),
        "wall_s": wall,
        "compute_s": compute,
        "overhead_s": wall - compute,
        "overhead_frac": (wall - compute) / wall if wall > 0 else 0.0,
    }


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from bat.config.load import load_config

    kinds = [k.strip() for k in args.executors.split(",") if k.strip()]
    bad = [k for k in kinds if k not in ("slurm", "local", "debug")]
    if bad:
        print(f"bench orchestration: unknown executor(s) {bad}; valid: slurm, local, debug")
        return 2
    if "slurm" in kinds and shutil.which("sbatch") is None:
        print(
            "bench orchestration: sbatch not found; start the local cluster with scripts/slurm_up.sh "
            "or pass --executors local"
        )
        return 2
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bat-bench-orch-"))
    results = {}
    for kind in kinds:
        config = load_config(
            args.config,
            [*args.overrides, f"orchestrate.executor={kind}", f"run.rounds={args.rounds}", "orchestrate.poll_s=0.5"],
        )
        results[kind] = measure(config, base / kind)
    table = Table(title=f"orchestration overhead: {args.config}, rounds 0..{args.rounds}")
    for col in ("executor", "phases", "wall s", "phase compute s", "overhead s", "overhead %"):
        table.add_column(col, justify="right")
    for kind, r in results.items():
        table.add_row(
            kind,
            str(r["phases"]),
            f"{r['wall_s']:.1f}",
            f"{r['compute_s']:.1f}",
            f"{r['overhead_s']:.1f}",
            f"{100 * r['overhead_frac']:.1f}",
        )
    console = Console(width=120)
    console.print(table)
    if "slurm" in results and "local" in results and results["local"]["overhead_s"] > 0:
        ratio = results["slurm"]["overhead_s"] / results["local"]["overhead_s"]
        console.print(
            f"slurm/local overhead ratio: {ratio:.2f}x "
            f"({results['slurm']['overhead_s'] / max(results['slurm']['phases'], 1):.1f} s vs "
            f"{results['local']['overhead_s'] / max(results['local']['phases'], 1):.1f} s per phase)"
        )
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)
    return 0
