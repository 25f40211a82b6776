"""Argument parsing shared by `jobs/*.py`, `run_round.sh` and `bat run` (heavy imports after parsing)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def common_parser(description: str) -> argparse.ArgumentParser:
    """`--config FILE --state DIR [--set k=v ...]` (the frozen flags of every entry point)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--config", default=None, help="YAML config (default: built-in defaults)")
    parser.add_argument("--state", required=True, help="run state directory, e.g. state/local")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="dotted override, repeatable, e.g. --set orchestrate.executor=slurm",
    )
    return parser


def phase_main(phase: str, argv: Sequence[str] | None = None) -> int:
    """`jobs/<phase>.py`: run one phase of one round in this process (DONE phase = no-op)."""
    parser = common_parser(f"run the {phase} phase of one round in this process")
    parser.add_argument("--round", type=int, required=True, help="round index (0 = bootstrap)")
    args = parser.parse_args(argv)
    from bat.config.load import ConfigError, load_config
    from bat.orchestrate.runner import run_phase
    from bat.state.layout import RunLayout

    try:
        config = load_config(args.config, args.overrides)
    except ConfigError as exc:
        print(f"{phase}: {exc}", file=sys.stderr)
        return 2
    result = run_phase(config, RunLayout(args.state), args.round, phase)
    print(f"{phase} round {args.round}: " + ("already DONE" if result is None else f"DONE {result.counts}"))
    return 0


def launch_main(argv: Sequence[str] | None = None) -> int:
    """`jobs/launch.py` (run_round.sh): check the phase list, then queue/run the next unfinished round(s)."""
    parser = common_parser("queue (Slurm) or run (local) the next unfinished round(s)")
    parser.add_argument(
        "--phases", default=None, help="space-separated phase list from run_round.sh; must match the phase table"
    )
    parser.add_argument("--rounds", type=int, default=None, help="override run.rounds (round budget)")
    parser.add_argument("--wait", action="store_true", help="on Slurm, wait until every round is DONE")
    args = parser.parse_args(argv)
    overrides = list(args.overrides) + ([f"run.rounds={args.rounds}"] if args.rounds is not None else [])
    from bat.config.load import ConfigError, load_config
    from bat.config.run_record import RunConfigMismatch
    from bat.orchestrate.driver import PhaseFailed, PhaseInputError, run
    from bat.orchestrate.graph import PHASES
    from bat.state.layout import RunLayout

    if args.phases is not None:
        expected = list(PHASES)  # the table's rows are in data-flow order
        given = args.phases.split()
        if given != expected:
            print(
                f"launch: run_round.sh lists phases {given}; the phase table's data-flow order is {expected}",
                file=sys.stderr,
            )
            return 2
    try:
        config = load_config(args.config, overrides)
        return run(config, RunLayout(args.state), wait=args.wait)
    except ConfigError as exc:
        print(f"launch: {exc}", file=sys.stderr)
        return 2
    except PhaseInputError as exc:
        print(f"launch: {exc}", file=sys.stderr)
        return 2
    except PhaseFailed as exc:
        print(f"launch: {exc}\nlaunch: fix the cause and rerun: finished phases are kept", file=sys.stderr)
        return 1
    except RunConfigMismatch as exc:
        print(f"launch: {exc}", file=sys.stderr)
        return 2
