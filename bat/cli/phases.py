"""`bat phases [--write FILE] [--check FILE]`: the phase I/O table, generated from the phase graph and the layout."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _handler(args: argparse.Namespace) -> int:
    from bat.orchestrate.phase_table import block_of, render_phase_table, replace_block
    from bat.state.atomic import atomic_write_text

    table = render_phase_table()
    target = args.write or args.check
    if target is None:
        print(table, end="")
        return 0
    path = Path(target)
    if not path.is_file():
        print(f"bat phases: {path}: no such file; give a document that holds the phase table markers", file=sys.stderr)
        return 2
    text = path.read_text(encoding="utf-8")
    try:
        updated = replace_block(text, table)
    except ValueError as exc:
        print(f"bat phases: {path}: {exc}", file=sys.stderr)
        return 2
    if args.check:
        if block_of(text) != table:
            print(
                f"bat phases: {path}: the phase table differs from the code; run `bat phases --write {path}`",
                file=sys.stderr,
            )
            return 1
        print(f"{path}: the phase table matches the code")
        return 0
    if updated != text:
        atomic_write_text(path, updated)
    print(f"{path}: phase table written ({len(table.splitlines()) - 2} phases)")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("phases", help="print the phase I/O table (from the phase graph and the layout)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", metavar="FILE", help="replace the table between the markers of FILE")
    mode.add_argument("--check", metavar="FILE", help="exit 1 when the table in FILE differs from the code")
    parser.set_defaults(handler=_handler)
