"""`bat doctor [--config FILE] [--state DIR] [--skip AREA] [--json]`: check what a round needs on this node (Slurm,
Apptainer and the image, user namespaces, GPUs, the model, state and scratch, the Python stack) and say what to do
about each problem (`bat.doctor`). Exit 0 when nothing is a problem, 2 otherwise."""

from __future__ import annotations

import argparse
import json
import os


def _doctor(args: argparse.Namespace) -> int:
    from bat.config import load_config
    from bat.doctor.checks import render, run_checks
    from bat.state.layout import RunLayout

    config = load_config(args.config, args.overrides)
    state = RunLayout.of(args.state or os.environ.get("BAT_STATE"), config.run.name).root
    findings = run_checks(config, state, tuple(args.skip))
    if args.json:
        print(json.dumps([f.as_dict() for f in findings], indent=2))
    else:
        print(render(findings))
    return 2 if any(f.status == "problem" for f in findings) else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    from bat.cli.config import add_config_arguments
    from bat.doctor.checks import AREAS

    parser = subparsers.add_parser(
        "doctor", help="check this node for what a round needs; ok / problem / what to do (exit 2 on a problem)"
    )
    add_config_arguments(parser)
    parser.add_argument("--state", help="run state directory (default: $BAT_STATE, else state/<run.name>)")
    parser.add_argument("--skip", action="append", default=[], choices=AREAS, help="leave an area out (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.set_defaults(handler=_doctor)
