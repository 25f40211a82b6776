"""`bat evaluate run | compare | explain | probe`: held-out evaluation of a checkpoint (or scripted agent), paired
comparison, failure breakdown, the held-out stage probe."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from bat.cli.config import add_config_arguments


def _setup(args: argparse.Namespace):
    from bat.config import load_config
    from bat.state.layout import RunLayout

    cfg = load_config(args.config, args.overrides)
    layout = RunLayout.of(args.state, cfg.run.name)
    return cfg, layout


def _run(args: argparse.Namespace) -> int:
    from bat.config import config_hash
    from bat.evaluate.aggregate import pct
    from bat.evaluate.episodes import SCRIPTED_PREFIX, policy_driver, scripted_driver
    from bat.evaluate.runner import evaluate_split
    from bat.evaluate.store import aggregate_path, heldout_runs_path

    cfg, layout = _setup(args)
    if bool(args.agent) == bool(args.checkpoint):
        print("bat evaluate run: give exactly one of --checkpoint DIR or --agent NAME")
        return 2
    recorded = [
        p
        for p in (aggregate_path(layout, args.round, args.split), heldout_runs_path(layout, args.round, args.split))
        if p.exists()
    ]
    if recorded:
        print(
            f"bat evaluate run: round {args.round} already has a {args.split} evaluation ({recorded[0]}); recorded "
            f"results are never overwritten: evaluate into another run directory (--state DIR) or round (--round N)"
        )
        return 2
    layout.ensure()
    close = None
    if args.agent:
        checkpoint, driver = SCRIPTED_PREFIX + args.agent, scripted_driver(args.agent)
    else:
        checkpoint = str(Path(args.checkpoint).resolve())
        driver, close = policy_driver(cfg, Path(checkpoint))
    try:
        agg, written = evaluate_split(
            cfg, layout, args.round, args.split, checkpoint, driver, config_hash=config_hash(cfg)
        )
    finally:
        if close:
            close()
    print(
        f"{args.split} round {args.round}: Overall {pct(agg.overall)} Task {pct(agg.task)} Agentic {pct(agg.agentic)} "
        f"({agg.n_runs} runs, {len(agg.null_cells)} null cells)"
    )
    for key in cfg.stage_keys:
        if key in agg.stages:
            print(f"  {key} {pct(agg.stages[key])}")
    for path in written:
        print(f"wrote {path}")
    return 0 if agg.routable else 1


def _compare(args: argparse.Namespace) -> int:
    from bat.evaluate.compare import paired_compare
    from bat.evaluate.store import load_aggregate

    cfg, layout = _setup(args)
    a = load_aggregate(layout, args.a, args.split)
    b = load_aggregate(layout, args.b, args.split)
    if a is None or b is None:
        print(
            f"bat evaluate compare: rounds with a {args.split} aggregate: "
            f"{[r for r in layout.rounds() if load_aggregate(layout, r, args.split)]}"
        )
        return 2
    cmp = paired_compare(a, b, args.metric, confidence=cfg.evaluate.confidence)
    print(json.dumps(cmp.model_dump(mode="json"), indent=2))
    return 0


def _explain(args: argparse.Namespace) -> int:
    from bat.evaluate.explain import ExplainError, explain

    try:
        print(explain(Path(args.dir), args.run), end="")
    except ExplainError as exc:
        print(f"bat evaluate explain: {exc}")
        return 2
    return 0


_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _probe(args: argparse.Namespace) -> int:
    """Build the run's stage probe when absent, score a checkpoint (or the expert) on it, print the table."""
    from bat.config import config_hash
    from bat.config.load import ConfigError
    from bat.config.run_record import config_of_run
    from bat.evaluate.stage_probe import ProbeMismatchError, build_probe
    from bat.evaluate.stage_probe_expert import score_checkpoint, score_expert
    from bat.evaluate.stage_probe_score import probe_table
    from bat.state.errors import StateFileError
    from bat.state.layout import RunLayout

    if bool(args.agent) == bool(args.checkpoint):
        print("bat evaluate probe: give exactly one of --checkpoint DIR or --agent expert")
        return 2
    if not Path(args.state).is_dir():
        print(f"bat evaluate probe: --state {args.state} is not a directory; give a run state directory")
        return 2
    label = args.label or ("expert" if args.agent else Path(args.checkpoint).resolve().name)
    if not _LABEL.match(label):
        print(f"bat evaluate probe: label {label!r} must be letters, digits, '_', '.', '-' (give --label NAME)")
        return 2
    try:
        cfg = config_of_run(args.state, args.config, args.overrides)
        layout = RunLayout.of(args.state, cfg.run.name)
        out = layout.stage_probe.score(label)
        if out.exists():
            raise FileExistsError(f"{out} exists; a finished probe score is never overwritten: give another --label")
        if args.checkpoint:
            from bat.policy.loader import check_model_dir

            check_model_dir(args.checkpoint)
        manifest, built = build_probe(cfg, layout)
        counts = ", ".join(f"{s} {n}" for s, n in manifest.states_by_stage.items())
        print(f"stage probe {'built' if built else 'found'}: {counts} states, digest {manifest.digest[:12]}")
        if args.agent:
            from bat.policy.base import base_model_dir

            tokenizer = base_model_dir(cfg.model, layout, seed=cfg.run.seed)
            score = score_expert(cfg, layout, label, tokenizer, config_hash=config_hash(cfg))
        else:
            score = score_checkpoint(cfg, layout, args.checkpoint, label, config_hash=config_hash(cfg))
    except (ConfigError, ProbeMismatchError, FileExistsError, StateFileError) as exc:
        print(f"bat evaluate probe: {exc}")
        return 2
    print(probe_table(score))
    print(f"wrote {out}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("evaluate", help="held-out evaluation and paired comparison")
    sub = parser.add_subparsers(dest="evaluate_command", metavar="ACTION", required=True)
    run = sub.add_parser("run", help="evaluate a checkpoint or a scripted agent on one split")
    add_config_arguments(run)
    run.add_argument("--state", help="run state directory (default state/<run.name>)")
    run.add_argument("--round", type=int, default=0, help="round the evaluation is filed under")
    run.add_argument(
        "--split",
        choices=["controller", "final"],
        default="controller",
        help="the test split is evaluated only by the final_test phase, once per run",
    )
    run.add_argument("--checkpoint", help="HF checkpoint directory to evaluate")
    run.add_argument("--agent", help="scripted benchmark agent to evaluate instead (expert, noop, skip-validate, ...)")
    run.set_defaults(handler=_run)
    cmp = sub.add_parser("compare", help="paired per-track comparison of two rounds' aggregates (b - a)")
    add_config_arguments(cmp)
    cmp.add_argument("--state", help="run state directory (default state/<run.name>)")
    cmp.add_argument("a", type=int, help="round A")
    cmp.add_argument("b", type=int, help="round B")
    cmp.add_argument("--split", choices=["controller", "final", "test"], default="controller")
    cmp.add_argument("--metric", default="overall", help="overall, task, agentic or a stage key")
    cmp.set_defaults(handler=_compare)
    why = sub.add_parser(
        "explain",
        help="failure breakdown of an evaluation or rollout folder (how runs ended, where they stalled, what each "
        "turn did wrong), or one run's transcript",
    )
    why.add_argument(
        "dir", help="round_NN/evaluate, heldout/round_NN/<split>, round_NN/rollout or one of its shard_NNNN folders"
    )
    why.add_argument("--run", help="print this run's (or rollout's) transcript turn by turn")
    why.set_defaults(handler=_explain)
    probe = sub.add_parser(
        "probe",
        help="score a checkpoint on the held-out stage probe (stage states from held-out instances, built once per "
        "run under heldout/stage_probe/): per-stage mean reward x100 with a 95%% interval",
    )
    add_config_arguments(probe)
    probe.add_argument("--state", required=True, help="run state directory (its run.json config unless --config)")
    probe.add_argument("--checkpoint", help="HF checkpoint directory to score")
    probe.add_argument(
        "--agent", choices=["expert"], help="score the expert's own continuation instead (the probe's reference)"
    )
    probe.add_argument("--label", help="name of the score (stage_probe/<label>.json; default: the checkpoint's folder)")
    probe.set_defaults(handler=_probe)
