"""`bat run --config FILE --state DIR [--rounds N] [--set k=v ...]`: queue (Slurm) or run (local) the rounds.

The twin of `run_round.sh`: inspects state, queues only unfinished phases, refuses a bad config
before anything is queued (exit 2), exits 1 when a phase failed (rerun to resume).
"""

from __future__ import annotations

import argparse

from bat.cli.config import add_config_arguments
from bat.config.load import load_config


def _handler(args: argparse.Namespace) -> int:
    from bat.config.run_record import RunConfigMismatch
    from bat.orchestrate.driver import PhaseFailed, PhaseInputError, run
    from bat.state.layout import RunLayout

    overrides = list(args.overrides) + ([f"run.rounds={args.rounds}"] if args.rounds is not None else [])
    if args.executor:
        overrides.append(f"orchestrate.executor={args.executor}")
    config = load_config(args.config, overrides)
    try:
        return run(config, RunLayout(args.state), wait=args.wait, allow_config_change=args.allow_config_change)
    except PhaseInputError as exc:
        print(f"bat run: {exc}")
        return 2
    except PhaseFailed as exc:
        print(f"bat run: {exc}\nbat run: finished phases are kept; rerun the same command to resume")
        return 1
    except RunConfigMismatch as exc:
        print(f"bat run: {exc}")
        return 2


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("run", help="run or queue the training rounds (local executor by default)")
    add_config_arguments(parser)
    parser.add_argument("--state", required=True, help="run state directory, e.g. state/local")
    parser.add_argument("--rounds", type=int, default=None, help="round budget (overrides run.rounds)")
    parser.add_argument(
        "--executor", choices=["auto", "slurm", "local", "debug"], default=None, help="override orchestrate.executor"
    )
    parser.add_argument("--wait", action="store_true", help="on Slurm, wait until every round is DONE")
    parser.add_argument(
        "--allow-config-change",
        action="store_true",
        help="continue a run whose state was written with a different config",
    )
    parser.set_defaults(handler=_handler)
