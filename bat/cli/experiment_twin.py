"""The arm-versus-twin study's modes of `bat experiment` (registered by `bat.cli.experiment`):

* `--sft-final [--seeds S]`: build (or resume) the shared bootstrap and score its SFT on the end-of-run final split,
  the same runs every arm x seed's end-of-run evaluation meets (`bat.experiment.sft_final`);
* `--twin-unit train|e2e|reference [--only ARM] [--seeds S]`: record finished units under `<twin_dir>/units/`
  (`bat.experiment.twin_units`); an unfinished replayed `e2e` or `reference` evaluation keeps its runs so far
  instead (`bat.experiment.twin_partial`: commit them, the evaluation resumes from them on any disk); exit 2 when
  a unit is not finished (nothing kept) or differs from the one recorded;
* `--twin-replay [--only ARM] [--seeds S]`: rebuild an arm x seed's candidate from its committed train unit (the
  rebuilt SFT with the kept LoRA adapter) and play its end-of-run final runs (`bat.experiment.twin_replay`), so
  `--twin-unit e2e` can record them on another disk than the one that trained it;
* `--twin-report`: the pre-registered analysis of the committed units: `<twin_dir>/results.json` and `curves.png`
  (`bat.experiment.twin_report`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

PARTS = ("train", "e2e", "reference")


def chosen(args: argparse.Namespace) -> list[str]:
    """The study modes asked for (empty: an ordinary `bat experiment`)."""
    flags = (
        ("--sft-final", args.sft_final),
        ("--twin-unit", args.twin_unit),
        ("--twin-replay", args.twin_replay),
        ("--twin-report", args.twin_report),
    )
    return [flag for flag, on in flags if on]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The study modes' flags on `bat experiment`."""
    parser.add_argument(
        "--sft-final",
        action="store_true",
        help="instead of running arms: build (or resume) the shared bootstrap and score its SFT export on the final "
        "split, the same runs every arm x seed's end-of-run evaluation meets, under the bootstrap's state dir "
        "(heldout/round_00/final/; resumes from its partial runs)",
    )
    parser.add_argument(
        "--twin-unit",
        choices=PARTS,
        help="instead of running arms: record finished units of the arm-vs-twin study under <twin_dir>/units/ (commit "
        "them): train (true reward per GRPO step, probe scores step_<N>), e2e (end-of-run final runs), reference "
        "(the SFT's final runs and probe step_0); a recorded unit is never overwritten",
    )
    parser.add_argument(
        "--twin-replay",
        action="store_true",
        help="instead of running arms: rebuild each selected arm x seed's final candidate from its committed train "
        "unit (the rebuilt SFT with the unit's kept LoRA adapter merged in; its weights must be the trained ones) "
        "and play its end-of-run final runs, which --twin-unit e2e then records (resumes from its partial runs)",
    )
    parser.add_argument(
        "--twin-report",
        action="store_true",
        help="instead of running arms: the pre-registered arm-vs-twin analysis of the committed units -> "
        "<twin_dir>/results.json and curves.png (criteria undecided while a unit is missing)",
    )


def run(spec, args: argparse.Namespace) -> int:
    """Run the one study mode asked for; the exit status. ExperimentError on a bad combination of flags."""
    from bat.experiment.spec import ExperimentError

    modes = chosen(args)
    others = [
        flag
        for flag, on in (
            ("--collect-only", args.collect_only),
            ("--supersede", args.supersede is not None),
            ("--wide-final", args.wide_final is not None),
            ("--null-control", args.null_control is not None),
        )
        if on
    ]
    if len(modes) > 1 or others:
        raise ExperimentError(f"{', '.join(modes + others)}: one mode at a time")
    if args.sft_final:
        return _sft_final(spec, args)
    from bat.experiment.twin_design import twin_design

    design = twin_design(spec)
    if args.twin_report:
        return _report(design)
    from bat.experiment.twin_units import record_units

    arms = list(args.only or design.arms)
    unknown = [a for a in arms if a not in design.arms]
    if unknown:
        raise ExperimentError(f"--only {unknown}: not an arm of the twin study; its arms: {list(design.arms)}")
    if args.twin_replay:
        return _replay(spec, design, arms, list(args.seeds or spec.seeds))
    lines, errors = record_units(spec, design, args.twin_unit, arms, list(args.seeds or spec.seeds))
    for line in lines:
        print(f"bat experiment: unit {line}")
    for line in errors:
        print(f"bat experiment: unit {line}", file=sys.stderr)
    return 2 if errors else 0


def _replay(spec, design, arms: list[str], seeds: list[int]) -> int:
    from bat.experiment.twin_errors import TwinReplayError
    from bat.experiment.twin_replay import replay_candidate

    calls = [partial(replay_candidate, spec, design, arm, seed) for arm in arms for seed in seeds]
    return _play_each(calls, TwinReplayError, "the replayed final evaluation")


def _sft_final(spec, args: argparse.Namespace) -> int:
    from bat.experiment.sft_final import SftFinalError, score_sft_final
    from bat.experiment.spec import bootstrap_seed_of

    out = Path(args.out or spec.out_dir)
    seeds = sorted({bootstrap_seed_of(spec, s) for s in (args.seeds or spec.seeds)})
    allow = args.allow_bootstrap_change
    calls = [partial(score_sft_final, spec, seed, out, allow_bootstrap_change=allow) for seed in seeds]
    return _play_each(calls, SftFinalError, "the SFT's final evaluation")


def _play_each(calls: list[Callable[[], str]], refused: type[Exception], what: str) -> int:
    """Run each call (it plays held-out runs and returns the line to print) until one fails: exit 2 when it refused
    (`refused`, or kept runs it cannot resume from: its message printed), 1 when its bootstrap or play job failed, else 0."""
    from bat.experiment.share import SharedStateError
    from bat.experiment.twin_partial import TwinPartialError
    from bat.experiment.wide import WideError

    for call in calls:
        try:
            line = call()
        except (refused, TwinPartialError) as exc:
            print(f"bat experiment: {exc}", file=sys.stderr)
            return 2
        except (SharedStateError, WideError) as exc:
            print(f"bat experiment: {what} FAILED: {exc}", file=sys.stderr)
            return 1
        print(f"bat experiment: {line}", flush=True)
    return 0


def _number(value: float | None, scale: str = "") -> str:
    return "-" if value is None else f"{value:+.3f}{scale}"


def _report(design) -> int:
    from bat.experiment.twin_report import write_twin_report

    results, written = write_twin_report(design)
    for c in results.criteria:
        interval = "-" if c.interval is None else f"[{c.interval[0]:+.3f}, {c.interval[1]:+.3f}]"
        passed = {True: "passed", False: "not passed", None: "undecided"}[c.passed]
        p = "" if c.p is None else f", p {c.p:.3g}"
        print(f"bat experiment: {c.name}: {_number(c.value)} {interval}{p}: {passed}")
    for line in results.missing:
        print(f"bat experiment: missing unit: {line}")
    for line in results.problems:
        print(f"bat experiment: PROBLEM: {line}")
    for line in results.notes:
        print(f"bat experiment: note: {line}")
    print(f"bat experiment: wrote {', '.join(str(p) for p in written)}")
    return 0
