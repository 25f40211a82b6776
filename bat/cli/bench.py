"""`bat bench <name>`: discovers `bat/perf/<name>.py` modules (HELP, add_arguments, run) and runs one."""

from __future__ import annotations

import argparse
import importlib
import pkgutil

import bat.perf as bench_pkg


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("bench", help="print speed figures (ratios side by side in one run)")
    sub = parser.add_subparsers(dest="bench_name", metavar="NAME", required=True)
    for info in sorted(pkgutil.iter_modules(bench_pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"bat.perf.{info.name}")
        if not all(hasattr(module, attr) for attr in ("HELP", "add_arguments", "run")):
            continue
        bench = sub.add_parser(info.name, help=module.HELP)
        module.add_arguments(bench)
        bench.set_defaults(handler=module.run)
