"""`bat report [--round N]`: (re)write round reports and plots from training-side files; print the run table."""

from __future__ import annotations

import argparse

from bat.cli.config import add_config_arguments


def _report(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from bat.config import load_config
    from bat.report.round_report import write_round_report
    from bat.report.summary import run_summary
    from bat.state.layout import RunLayout

    cfg = load_config(args.config, args.overrides)
    layout = RunLayout.of(args.state, cfg.run.name)
    rounds = layout.rounds()
    if not rounds:
        print(f"bat report: no round directories under {layout.root}")
        return 2
    targets = rounds if args.round is None else [args.round]
    unknown = sorted(set(targets) - set(rounds))
    if unknown:
        print(f"bat report: rounds {unknown} not found; rounds on disk: {rounds}")
        return 2
    for r in targets:
        for path in write_round_report(layout, r, cfg):
            print(f"wrote {path}")
    table = Table(title=f"{cfg.run.name}: held-out controller scores (0-100)")
    rows = run_summary(layout)
    for column in ("round", "overall", "task", "agentic", "best", "action", "target", "nulls"):
        table.add_column(column, justify="right" if column not in ("action", "target") else "left")
    for row in rows:
        table.add_row(
            *(str(row[c]) for c in ("round", "overall", "task", "agentic", "best", "action", "target", "nulls"))
        )
    Console().print(table)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report", help="write round reports (report.md/json + PNG plots) and print the run table"
    )
    add_config_arguments(parser)
    parser.add_argument("--state", help="run state directory (default state/<run.name>)")
    parser.add_argument("--round", type=int, help="only this round (default: every round on disk)")
    parser.set_defaults(handler=_report)
