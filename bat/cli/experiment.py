"""`bat experiment --config FILE [--only ARM ...] [--seeds 1,2] [--out DIR] [--collect-only] [--allow-config-change]
[--supersede TAG --reason TEXT] [--wide-final N] [--null-control SEEDS --null-kl KL] [--sft-final]
[--twin-unit train|e2e|reference] [--twin-replay] [--twin-report]` (the last four: `bat.cli.experiment_twin`).

Arm comparison.

Runs every arm x seed of an experiment file (configs/experiments/*.yaml) through the ordinary driver, reusing one
shared bank + SFT checkpoint per seed, then writes `<out>/README.md`, `results.json` and `curves.png`.
Exit 0 when every selected run finished, 1 when a run failed (all runs are still reported), 2 on bad input.
"""

from __future__ import annotations

import argparse
import shlex
import sys


def _seeds(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seeds takes comma-separated integers, got {text!r}") from None


def _handler(args: argparse.Namespace) -> int:
    from bat.cli.experiment_twin import chosen as twin_modes
    from bat.cli.experiment_twin import run as run_twin_mode
    from bat.experiment.pieces import SupersedeError
    from bat.experiment.run import select
    from bat.experiment.spec import ExperimentError, load_experiment

    try:
        spec = load_experiment(args.config)
        arms, seeds = select(spec, args.only, args.seeds)
        if twin_modes(args):
            return run_twin_mode(spec, args)
        supersede_as = _supersede_as(args)
        if args.wide_final is not None and (args.collect_only or supersede_as):
            raise ExperimentError(
                "--wide-final re-scores finished runs: it goes without --collect-only and --supersede"
            )
        _check_null_args(spec, args, supersede_as)
    except ExperimentError as exc:
        print(f"bat experiment: {exc}", file=sys.stderr)
        return 2
    from bat.experiment.null_control import NullControlError

    try:
        results = _run(spec, args, supersede_as)
    except (SupersedeError, NullControlError) as exc:
        print(f"bat experiment: {exc}", file=sys.stderr)
        return 2
    return _report(args, spec, arms, seeds, results)


def _supersede_as(args: argparse.Namespace) -> tuple[str, str] | None:
    """(tag, reason) of `--supersede TAG --reason TEXT`, None without them; ExperimentError when one comes without
    the other or without an explicit `--only` and `--seeds` (superseding every arm x seed by accident is refused)."""
    from bat.experiment.spec import ExperimentError

    if args.supersede is None and args.reason is None:
        return None
    if args.supersede is None or not (args.reason or "").strip():
        raise ExperimentError("--supersede TAG and --reason TEXT go together")
    if not args.only or not args.seeds or args.collect_only:
        raise ExperimentError(
            "--supersede needs --only ARM and --seeds N (the arm x seeds to run again), not --collect-only"
        )
    return args.supersede, args.reason


def _check_null_args(spec, args: argparse.Namespace, supersede_as: tuple[str, str] | None) -> None:
    """ExperimentError unless `--null-control` and `--null-kl` come together, alone, for an experiment that widens
    its final split (`wide_final_repeats`: the null control is scored on the same runs)."""
    from bat.experiment.spec import ExperimentError

    if args.null_control is None and args.null_kl is None:
        return
    if args.null_control is None or args.null_kl is None:
        raise ExperimentError("--null-control SEEDS and --null-kl KL go together")
    if args.collect_only or supersede_as or args.wide_final is not None or args.only or args.seeds:
        raise ExperimentError(
            "--null-control scores the SFT moved at random, not arms: it goes without --only, --seeds, "
            "--collect-only, --supersede and --wide-final"
        )
    if not spec.wide_final_repeats:
        raise ExperimentError(
            f"{args.config}: --null-control is scored on the arms' wide final runs; set wide_final_repeats"
        )


def _run(spec, args: argparse.Namespace, supersede_as: tuple[str, str] | None):
    from bat.experiment.run import run_experiment

    if args.wide_final is not None:
        return _run_wide(spec, args)
    if args.null_control is not None:
        return _run_null(spec, args)

    return run_experiment(
        spec,
        only=args.only,
        seeds=args.seeds,
        command=_command(args),
        out_dir=args.out,
        collect_only=args.collect_only,
        allow_config_change=args.allow_config_change,
        supersede_as=supersede_as,
        allow_bootstrap_change=args.allow_bootstrap_change,
    )


def _run_wide(spec, args: argparse.Namespace):
    """`--wide-final N`: widen the selected finished arm x seeds (`bat.experiment.wide`), then re-collect; the
    results carry `wide_skipped` (one line per arm x seed that could not be widened: exit 1)."""
    from pathlib import Path

    from bat.experiment.collect import collect
    from bat.experiment.run import select
    from bat.experiment.wide import print_wide, run_wide
    from bat.experiment.write import stamp, write_results

    arms, seeds = select(spec, args.only, args.seeds)
    out = Path(args.out or spec.out_dir)
    lines, skipped = run_wide(spec, [a.name for a in arms], seeds, args.wide_final, out)
    print_wide(lines, skipped)
    results = stamp(collect(spec, out), _command(args))
    write_results(spec, results, args.out)
    return results.model_copy(update={"wide_skipped": skipped})


def _run_null(spec, args: argparse.Namespace):
    """`--null-control SEEDS --null-kl KL`: score one null checkpoint per null seed (`bat.experiment.null_control`)
    on the experiment's wide final runs, then re-collect (the report lists them as the arm `_null-kl<KL>`)."""
    from pathlib import Path

    from bat.experiment.collect import collect
    from bat.experiment.null_control import run_null_control
    from bat.experiment.write import stamp, write_results

    out = Path(args.out or spec.out_dir)
    for null_seed in args.null_control:
        print(f"bat experiment: null control seed {null_seed}, KL {args.null_kl} from the SFT", flush=True)
        line = run_null_control(spec, null_seed, args.null_kl, spec.wide_final_repeats, out)
        print(f"bat experiment: {line}", flush=True)
    results = stamp(collect(spec, out), _command(args))
    write_results(spec, results, args.out)
    return results


def _number(flag: str, cast, low: float, high: float, what: str):
    """An argparse type: `cast(text)` within [low, high], else an error naming `flag` and `what` it takes."""

    def parse(text: str):
        try:
            value = cast(text)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{flag} takes {what}, got {text!r}")
        return value

    return parse


def _report(args: argparse.Namespace, spec, arms: list, seeds: list[int], results) -> int:
    """Print where the results went and every selected arm x seed that did not finish; the exit status."""
    from bat.state.experiment_layout import ResultsLayout

    files = ResultsLayout(args.out or spec.out_dir)
    print(f"bat experiment: wrote {files.report}, {files.results}, {files.curves}")
    selected = {a.name for a in arms}
    bad = [
        (name, s)
        for name, arm in results.arms.items()
        if name in selected
        for s in arm.seeds
        if s.seed in seeds and not s.done
    ]
    for name, run in bad:
        seed, status, hint = run.seed, run.status, ""
        if status == "unfinished":
            hint = (
                f" (an attempt started {run.attempt_started_at} has written no record: it is running now, or "
                "it was stopped; the same command resumes it)"
            )
        elif status == "stale":
            fields = results.budget.stale[f"{name}/s{seed}"]
            hint = (
                f" (ran under other budget fields: {fields}, [ran under, now]; set it aside with --only {name} "
                f"--seeds {seed} --supersede TAG --reason TEXT to rerun it)"
            )
        print(f"bat experiment: arm {name} seed {seed}: {status}{hint}")
    return 1 if bad or results.shared_failures or results.wide_skipped else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("experiment", help="compare arms (base/SFT/GRPO/BiCuRL/ablations) x seeds")
    parser.add_argument("--config", required=True, help="experiment file, e.g. configs/experiments/arms_local.yaml")
    parser.add_argument(
        "--only",
        action="append",
        metavar="ARM",
        help="run only this arm (repeatable); results still cover every arm already on disk",
    )
    parser.add_argument("--seeds", type=_seeds, help="comma-separated subset of the experiment's seeds")
    parser.add_argument("--out", help="results directory (default: the experiment's out_dir)")
    parser.add_argument(
        "--collect-only",
        action="store_true",
        help="only re-collect results from the state dirs and the committed pieces under OUT/runs/",
    )
    parser.add_argument(
        "--allow-config-change",
        action="store_true",
        help="resume arm runs whose resolved config changed (e.g. new config fields of a newer bat); finished phases "
        "are kept, the previous run.json is kept as run.<hash>.json",
    )
    parser.add_argument(
        "--allow-bootstrap-change",
        action="store_true",
        help="train the selected arms even when the rebuilt shared bootstrap's SFT digest differs from the committed "
        "one (another CPU kind): their results then start from another checkpoint than the committed arms'",
    )
    parser.add_argument(
        "--supersede",
        metavar="TAG",
        help="run the --only ARM x --seeds N again: their committed records move to OUT/superseded/TAG/ and their "
        "state dirs aside, listed in the results as superseded (needs --reason)",
    )
    parser.add_argument("--reason", metavar="TEXT", help="why the superseded runs are redone (with --supersede)")
    parser.add_argument(
        "--wide-final",
        type=_number("--wide-final", int, 2, 1000, "runs per track (2-1000)"),
        metavar="N",
        help="instead of running arms: re-score the selected finished arm x seeds' retained checkpoints on N final "
        "runs per track (the end-of-run runs are reused), record them under OUT/wide/ and re-collect",
    )
    parser.add_argument(
        "--null-control",
        type=_seeds,
        metavar="SEEDS",
        help="instead of running arms: move the shared SFT along a random direction per null seed (comma-separated) "
        "to KL --null-kl from it, score each on the wide final runs, record them under OUT/wide/_null-kl<KL>/ and "
        "re-collect: what a change of that size scores without learning",
    )
    parser.add_argument(
        "--null-kl",
        type=_number("--null-kl", float, 1e-6, 10.0, "a KL above 0 (e.g. 0.02)"),
        metavar="KL",
        help="the null control's KL from the SFT (with --null-control)",
    )
    from bat.cli.experiment_twin import add_arguments as add_twin_arguments

    add_twin_arguments(parser)
    parser.set_defaults(handler=_handler)


def _command(args: argparse.Namespace) -> str:
    """The exact command, rebuilt from the parsed flags (recorded in the results)."""
    words = ["bat", "experiment", "--config", args.config]
    for arm in args.only or []:
        words += ["--only", arm]
    if args.seeds:
        words += ["--seeds", ",".join(map(str, args.seeds))]
    if args.out:
        words += ["--out", args.out]
    if args.collect_only:
        words.append("--collect-only")
    if args.allow_config_change:
        words.append("--allow-config-change")
    if args.allow_bootstrap_change:
        words.append("--allow-bootstrap-change")
    if args.supersede:
        words += ["--supersede", args.supersede, "--reason", args.reason or ""]
    if args.wide_final is not None:
        words += ["--wide-final", str(args.wide_final)]
    if args.null_control is not None:
        words += ["--null-control", ",".join(map(str, args.null_control)), "--null-kl", f"{args.null_kl:g}"]
    return " ".join(shlex.quote(w) for w in words)
