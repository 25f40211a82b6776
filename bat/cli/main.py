"""`bat` entry point: builds the parser from every `bat/cli/<group>.py` that defines `register(subparsers)`.

Exit codes: 0 success, 1 the command ran and failed (e.g. a check did not pass), 2 bad usage or
bad input (invalid config, missing files), 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

import bat.cli as cli_pkg

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def build_parser() -> argparse.ArgumentParser:
    """Parser with one subcommand group per `bat.cli` module that has `register`."""
    parser = argparse.ArgumentParser(
        prog="bat",
        description="Benchmark-as-Teacher: staged-benchmark post-training of tool-using agents on Slurm.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(cli_pkg.__path__), key=lambda m: m.name):
        if info.name in {"main"} or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"bat.cli.{info.name}")
        register = getattr(module, "register", None)
        if callable(register):
            register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` and run the chosen handler; returns the exit code (also used by the console script)."""
    from bat.config.load import ConfigError
    from bat.state.errors import StateFileError

    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        code = handler(args)
    except (ConfigError, StateFileError) as exc:
        print(f"bat: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("bat: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_OK if code is None else int(code)


if __name__ == "__main__":
    sys.exit(main())
