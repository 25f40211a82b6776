"""`bat rollout` and `bat verify`: run the rollout / verify phase of one round plan (resumable, DONE-marked);
`bat verify --rescore`: verify a finished round's rollouts again under another reward config, writing nothing."""

from __future__ import annotations

import argparse

from bat.cli.config import add_config_arguments


def _run(phase: str, args: argparse.Namespace) -> int:
    from bat.config import load_config
    from bat.orchestrate.runner import run_phase
    from bat.state.layout import RunLayout
    from bat.state.markers import read_done

    if getattr(args, "rescore", False):
        return _rescore(args)
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


def _rescore(args: argparse.Namespace) -> int:
    """Print each pool's training signal as recorded and as rescored, then every group's rewards both ways."""
    from bat.config.load import ConfigError
    from bat.config.run_record import config_of_run
    from bat.state.layout import RunLayout
    from bat.verify.rescore import compare_signal, rescore_round
    from bat.verify.shards import read_rewards

    try:
        cfg = config_of_run(args.state, args.config, args.overrides)
        layout = RunLayout.of(args.state, cfg.run.name)
        rescored = rescore_round(cfg, layout, args.round)
    except (ConfigError, FileNotFoundError) as exc:
        print(f"bat verify --rescore: {exc}")
        return 2
    recorded = read_rewards(layout.phase_dir(args.round, "verify"))
    table = compare_signal(recorded, rescored)
    print(
        f"round {args.round}: {len(recorded)} recorded rewards vs rescored under verify.stage_evidence="
        f"{cfg.verify.stage_evidence}, verify.e2e_reward={cfg.verify.e2e_reward}; identical groups / groups, mean reward"
    )
    for pool, both in table["pools"].items():
        cells = [
            "-" if s is None else f"{s['groups_identical']}/{s['groups']} identical, mean {s['reward_mean']:.3f}"
            for s in (both["recorded"], both["rescored"])
        ]
        print(f"  {pool:8s} recorded {cells[0]:32s} rescored {cells[1]}")
    for g in table["groups"]:
        print(f"  {g['pool']:8s} {g['state_id']}: {_rewards_text(g['recorded'])} -> {_rewards_text(g['rescored'])}")
    return 0


def _rewards_text(rewards: list[float | None] | None) -> str:
    """`[0.667, inv, 0.000]` (inv = an invalid rollout), or `-` for a group that was not recorded."""
    if rewards is None:
        return "-"
    return "[" + ", ".join("inv" if r is None else f"{r:.3f}" for r in rewards) + "]"


def _add(sub: argparse._SubParsersAction, phase: str, help_text: str) -> argparse.ArgumentParser:
    parser = sub.add_parser(phase, help=help_text)
    add_config_arguments(parser)
    parser.add_argument("--state", help="run state directory (default: state/<run.name>)")
    parser.add_argument("--round", type=int, required=True, help="round index whose plan.json to use (>= 1)")
    parser.set_defaults(handler=lambda args: _run(phase, args))
    return parser


def register(subparsers: argparse._SubParsersAction) -> None:
    _add(subparsers, "rollout", "K multi-turn rollouts per state of a round plan -> round_NN/rollout/ shards")
    verify = _add(subparsers, "verify", "rubric rewards for a round's rollout shards -> round_NN/verify/ shards")
    verify.add_argument(
        "--rescore",
        action="store_true",
        help="verify the round's finished rollouts again under this config (default: the run's run.json, with --set "
        "on top) and print each pool's identical groups recorded vs rescored; writes nothing in the run",
    )
