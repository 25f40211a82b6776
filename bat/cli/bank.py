"""`bat bank synthesize | show | scan`: build a new Stage Bank version, print its counts, run the leakage preflight."""

from __future__ import annotations

import argparse
from pathlib import Path

from bat.cli.config import add_config_arguments


def _layout(args: argparse.Namespace, cfg):
    from bat.state.layout import RunLayout

    return RunLayout(Path(args.state) if args.state else Path("state") / cfg.run.name)


def _synthesize(args: argparse.Namespace) -> int:
    from bat.bank.synthesize import synthesize
    from bat.config import load_config

    cfg = load_config(args.config, args.overrides)
    layout = _layout(args, cfg).ensure()
    bank, reused = synthesize(cfg, layout)
    verb = "reused" if reused else "wrote"
    print(f"{verb} bank v{bank.version:04d} at {bank.path}")
    _print_counts(bank)
    return 0


def _show(args: argparse.Namespace) -> int:
    from bat.bank.store import BankNotFoundError, open_bank
    from bat.config import load_config

    cfg = load_config(args.config, args.overrides)
    try:
        bank = open_bank(_layout(args, cfg), args.version, admitted_only=False)
    except BankNotFoundError as exc:
        print(f"bat bank show: {exc}")
        return 2
    status = "admitted" if bank.admitted else "not admitted (run `bat bank scan`)"
    print(f"bank v{bank.version:04d}  {status}  fingerprint {bank.manifest().fingerprint[:16]}")
    _print_counts(bank)
    return 0


def _print_counts(bank) -> None:
    """Print stage x outcome counts (RL rows) per track and the SFT/E2E totals as rich tables."""
    from rich.console import Console
    from rich.table import Table

    manifest = bank.manifest()
    counts = manifest.counts
    outcomes = ["success", "recovery", "failure"]
    table = Table(title=f"RL rows, bank v{bank.version:04d} (stage x track x outcome)")
    table.add_column("stage")
    table.add_column("track")
    for outcome in outcomes:
        table.add_column(outcome, justify="right")
    table.add_column("total", justify="right")
    for stage, by_track in counts.get("rl", {}).items():
        for track, by_outcome in by_track.items():
            values = [int(by_outcome.get(o, 0)) for o in outcomes]
            table.add_row(stage, track, *map(str, values), str(sum(values)))
    console = Console(width=120)
    console.print(table)
    sft = counts.get("sft", {})
    e2e = counts.get("e2e", {})
    console.print(
        f"RL rows {counts.get('rl_total', 0)} | SFT train {sft.get('train', 0)} validation {sft.get('validation', 0)}"
        f" rejected overlong {sft.get('rejected', {}).get('overlong', 0)} | trajectories {counts.get('trajectories', 0)}"
        f" | E2E candidates {e2e.get('candidates', 0)} accepted {e2e.get('accepted', 0)}"
        f" rejected {e2e.get('rejected_by_reason', {})}"
    )


def _scan(args: argparse.Namespace) -> int:
    from bat.leakage.cli import cli_scan

    return cli_scan(args)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("bank", help="Stage Bank: synthesize a version, show counts, leakage scan")
    sub = parser.add_subparsers(dest="bank_command", metavar="ACTION", required=True)

    synth = sub.add_parser("synthesize", help="build the next bank version (no-op if this config+seed exists)")
    add_config_arguments(synth)
    synth.add_argument("--state", default=None, help="run state directory (default: state/<run.name>)")
    synth.set_defaults(handler=_synthesize)

    show = sub.add_parser("show", help="print the counts table of a bank version")
    add_config_arguments(show)
    show.add_argument("--state", default=None, help="run state directory (default: state/<run.name>)")
    show.add_argument("--version", type=int, default=None, help="bank version (default: newest complete)")
    show.set_defaults(handler=_show)

    try:
        from bat.leakage.cli import add_scan_arguments
    except ImportError:
        return
    scan = sub.add_parser("scan", help="leakage preflight of a bank version (admits or rejects it)")
    add_scan_arguments(scan)
    scan.set_defaults(handler=_scan)
