"""`bat bank synthesize | show | scan`: build a new Stage Bank version, print its counts, run the leakage preflight."""

from __future__ import annotations

import argparse
import sys

from bat.cli.config import add_config_arguments


def _layout(args: argparse.Namespace, cfg):
    from bat.state.layout import RunLayout

    return RunLayout.of(args.state, cfg.run.name)


def _synthesize(args: argparse.Namespace) -> int:
    from bat.bank.synthesize import synthesize
    from bat.config import load_config

    if args.refresh < 0:
        print(
            f"bat bank synthesize: --refresh must be 0 (the bootstrap bank) or more, got {args.refresh}",
            file=sys.stderr,
        )
        return 2
    cfg = load_config(args.config, args.overrides)
    layout = _layout(args, cfg).ensure()
    bank, reused = synthesize(cfg, layout, refresh=args.refresh)
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
    try:
        bank.verify()
    except ValueError as exc:
        print(
            f"bat bank show: {bank.path}: {exc}; the version is damaged: synthesize a new one "
            f"(move {bank.path} aside and rerun `bat run`)"
        )
        return 2
    status = "admitted" if bank.admitted else "not admitted (run `bat bank scan`)"
    print(f"bank v{bank.version:04d}  {status}  fingerprint {bank.manifest().fingerprint[:16]}")
    _print_counts(bank)
    return 0


def _print_counts(bank) -> None:
    """Print RL rows as a (stage, outcome) x track table, then the SFT / E2E / trajectory totals."""
    from rich.console import Console
    from rich.table import Table

    counts = bank.manifest().counts
    rl = counts.get("rl", {})
    tracks = sorted({t for by_track in rl.values() for t in by_track})
    table = Table(title=f"RL rows of bank v{bank.version:04d} (stage x outcome x track)")
    for name in ("stage", "outcome", *tracks, "total"):
        table.add_column(name, justify="left" if name in ("stage", "outcome") else "right")
    for stage, by_track in rl.items():
        for outcome in ("success", "recovery", "failure"):
            values = [int(by_track.get(t, {}).get(outcome, 0)) for t in tracks]
            if sum(values):
                table.add_row(stage, outcome, *map(str, values), str(sum(values)))
    console = Console(width=140)
    console.print(table)
    sft, e2e = counts.get("sft", {}), counts.get("e2e", {})
    rejected = sft.get("rejected", {})
    console.print(
        f"RL rows {counts.get('rl_total', 0)} | SFT train {sft.get('train', 0)} validation {sft.get('validation', 0)} "
        f"by stage {sft.get('by_stage', {})} | overlong rejected {rejected.get('overlong', 0)} "
        f"(limit {rejected.get('limit')} {rejected.get('unit')}) | trajectories {counts.get('trajectories', 0)} "
        f"(unchecked {counts.get('trajectories_unchecked', {})}) | E2E accepted {e2e.get('accepted', 0)}/"
        f"{e2e.get('candidates', 0)} rejected {e2e.get('rejected_by_reason', {})}"
    )


def _scan(args: argparse.Namespace) -> int:
    from bat.cli.leakage_scan import cli_scan

    return cli_scan(args)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("bank", help="Stage Bank: synthesize a version, show counts, leakage scan")
    sub = parser.add_subparsers(dest="bank_command", metavar="ACTION", required=True)

    synth = sub.add_parser("synthesize", help="build the next bank version (no-op if this config+seed exists)")
    add_config_arguments(synth)
    synth.add_argument("--state", default=None, help="run state directory (default: state/<run.name>)")
    synth.add_argument(
        "--refresh",
        type=int,
        default=0,
        help="refresh index: 0 is the bootstrap bank, k >= 1 draws new practice tasks (the refresh beside round k)",
    )
    synth.set_defaults(handler=_synthesize)

    show = sub.add_parser("show", help="print the counts table of a bank version")
    add_config_arguments(show)
    show.add_argument("--state", default=None, help="run state directory (default: state/<run.name>)")
    show.add_argument("--version", type=int, default=None, help="bank version (default: newest complete)")
    show.set_defaults(handler=_show)

    from bat.cli.leakage_scan import add_scan_arguments

    scan = sub.add_parser("scan", help="leakage preflight of a bank version (admits or rejects it)")
    add_scan_arguments(scan)
    scan.set_defaults(handler=_scan)
