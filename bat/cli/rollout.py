"""`bat rollout` and `bat verify`: run the rollout / verify phase of one round plan (resumable, DONE-marked)."""

from __future__ import annotations

import argparse

from bat.cli.config import add_config_arguments


def _run(phase: str, args: argparse.Namespace) -> int:
    from bat.config import load_config
    from bat.orchestrate.runner import run_phase
    from bat.state.layout import RunLayout
    from bat.state.markers import read_done

    cfg = load_config(args.config, args.overrides)
    layout = RunLayout.of(args.state, cfg.run.name)
    try:
        result = run_phase(cfg, layout, args.round, phase)
    except FileNotFoundError as exc:
        print(f"bat {phase}: {exc}")
        return 2
    if result is None:
        print(f"round {args.round} {phase}: already DONE ({layout.done_marker(args.round, phase)})")
        return 0
    done = read_done(layout.phase_dir(args.round, phase))
    counts = ", ".join(f"{k}={v:g}" for k, v in sorted(result.counts.items()))
    print(f"round {args.round} {phase}: {counts}")
    if done is not None and result.extra:
        for key in ("end_reasons", "reward_version", "judge", "invalid_reasons"):
            if key in result.extra:
                print(f"  {key}: {result.extra[key]}")
    return 0


def _add(sub: argparse._SubParsersAction, phase: str, help_text: str) -> None:
    parser = sub.add_parser(phase, help=help_text)
    add_config_arguments(parser)
    parser.add_argument("--state", help="run state directory (default: state/<run.name>)")
    parser.add_argument("--round", type=int, required=True, help="round index whose plan.json to use (>= 1)")
    parser.set_defaults(handler=lambda args: _run(phase, args))


def register(subparsers: argparse._SubParsersAction) -> None:
    _add(subparsers, "rollout", "K multi-turn rollouts per state of a round plan -> round_NN/rollout/ shards")
    _add(subparsers, "verify", "rubric rewards for a round's rollout shards -> round_NN/verify/ shards")
