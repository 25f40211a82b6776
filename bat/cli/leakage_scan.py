"""`bat bank scan` (wired by bat/cli/bank.py): leakage preflight of one bank version from the command line.

Exit codes: 0 admitted, 1 rejected, 2 bad input (no such version, no index to read or build).
"""

from __future__ import annotations

import argparse


def add_scan_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `bat bank scan`: config, state dir, version, how many flagged rows to print."""
    from bat.cli.config import add_config_arguments

    add_config_arguments(parser)
    parser.add_argument("--state", default=None, help="run state directory (default: state/<run.name>)")
    parser.add_argument("--version", type=int, default=None, help="bank version (default: newest complete)")
    parser.add_argument("--show", type=int, default=10, help="flagged rows to print (default 10)")


def cli_scan(args: argparse.Namespace) -> int:
    """Scan, write leakage.json + ADMITTED/REJECTED.json, print the summary; 0 admitted, 1 rejected, 2 bad input."""
    from bat.config import load_config
    from bat.leakage.phase import newest_complete_version
    from bat.leakage.preflight import report_path, scan_and_admit
    from bat.state.layout import RunLayout

    cfg = load_config(args.config, args.overrides)
    layout = RunLayout.of(args.state, cfg.run.name)
    try:
        version = args.version if args.version is not None else newest_complete_version(layout)
        report = scan_and_admit(layout, version, cfg)
    except (FileNotFoundError, RuntimeError, ValueError) as exc:
        print(f"bat bank scan: {exc}")
        return 2
    print_report(report, args.show)
    print(f"report: {report_path(layout, version)}")
    return 0 if report.verdict == "admitted" else 1


def print_report(report, show: int = 10) -> None:
    """Rich summary: verdict and counts, hits by kind, the similarity audit, the first `show` flagged rows."""
    from rich.console import Console
    from rich.table import Table

    console = Console(width=120)
    state = "" if report.scanned else " (preflight disabled: not scanned)"
    console.print(
        f"bank {report.bank_version}: [bold]{report.verdict}[/bold]{state} | files {report.files_scanned} "
        f"(binary {report.binary_files}) | rows {report.rows_scanned} | flagged {report.rows_flagged}"
    )
    kinds = Table(title="hits by kind")
    for column in ("kind", "hits", "rows"):
        kinds.add_column(column, justify="right" if column != "kind" else "left")
    for kind, hits in report.hits_by_kind.items():
        kinds.add_row(kind, str(hits), str(report.rows_by_kind.get(kind, 0)))
    console.print(kinds)
    audit = report.similarity
    bins = " ".join(f"[{b.lo:.1f},{b.hi:.1f}):{b.count}" for b in audit.histogram)
    console.print(
        f"near-duplicate audit (word {audit.shingle_size}-shingles, threshold {audit.jaccard_threshold}): "
        f"{audit.rows_with_text} rows with text; per-row max Jaccard {audit.quantiles}; histogram {bins}"
    )
    for row in report.findings[:show]:
        where = f"{row.file}:{row.line}" if row.line else row.file
        first = "; ".join(f"{f.kind} at {f.location}: {f.matched!r}" for f in row.findings[:3])
        console.print(f"  {row.row_id} ({where}): {first}" + (" ..." if len(row.findings) > 3 else ""))
