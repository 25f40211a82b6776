"""`bat benchmark run --agent expert|noop|skip-validate [--track T] [--json] [--config FILE] [--state DIR]`: score a
built-in agent on the held-out suite and print per-track and mean Overall / Agentic / Task (0-100, one decimal).

`bat benchmark list [--json]`: the staged benchmarks available by name (`bat.staged.registry`) with their stages
and tracks. `bat benchmark check NAME`: the conformance checks (`bat.benchmark.conformance`); exit 2 with one line
per failure.

The held-out suite is the one of the run at `--state` (its `heldout/SECRET`), else this user's standalone suite
(`bat.state.layout.user_heldout_secret`, created on first use)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from bat.benchmark import workspace_files as wf


def _secret(args: argparse.Namespace) -> Any:
    """The held-out secret of the run at `--state` (which must have one), else the user's standalone secret."""
    from bat.benchmark.secret import load_or_create_secret, read_secret
    from bat.state.errors import StateFileError
    from bat.state.layout import RunLayout, user_heldout_secret

    if args.state:
        path = RunLayout(args.state).heldout_secret
        if not path.exists():
            raise StateFileError(
                path,
                "not found",
                hint="--state must name a run directory that has been started (bat run creates its held-out secret)",
            )
        return read_secret(path)
    return load_or_create_secret(user_heldout_secret())


def _run(args: argparse.Namespace) -> int:
    from bat.benchmark import AGENTS, SPLITS, TRACKS, aggregate, run_suite
    from bat.benchmark.heldout_runs import run_heldout
    from bat.staged import registry

    cfg = _config_of(args)
    name = args.benchmark or cfg.benchmark.name
    bench = None
    if name != "builtin":
        try:
            bench = registry.load(name, cfg)
        except registry.UnknownBenchmarkError as exc:
            print(f"bat benchmark: {exc}", file=sys.stderr)
            return 2
    agents, tracks = (AGENTS, TRACKS) if bench is None else (bench.agents, bench.tracks())
    if args.agent not in agents:
        print(f"bat benchmark: unknown agent {args.agent!r}; valid: {list(agents)}", file=sys.stderr)
        return 2
    if args.track and args.track not in tracks:
        print(f"bat benchmark: unknown track {args.track!r}; valid: {list(tracks)}", file=sys.stderr)
        return 2
    if args.split not in SPLITS:
        print(f"bat benchmark: unknown split {args.split!r}; valid: {list(SPLITS)}", file=sys.stderr)
        return 2
    chosen = (args.track,) if args.track else None
    if bench is None:
        scores: list[Any] = run_suite(args.agent, cfg, secret=_secret(args), split=args.split, tracks=chosen)
    else:
        secret = _secret(args).key
        seed = cfg.benchmark.heldout_seed
        scores = run_heldout(bench, args.agent, split=args.split, seed=seed, secret=secret, tracks=chosen)
    agg = aggregate(scores)
    pct = lambda v: None if v is None else round(100 * v, 1)  # noqa: E731
    if args.json:
        out = {
            "benchmark": name,
            "agent": args.agent,
            "split": args.split,
            "runs": len(scores),
            "nulls": agg["nulls"],
            "mean": {m: pct(agg[m]) for m in ("overall", "agentic", "task")},
            "tracks": {t: {m: pct(v) for m, v in row.items()} for t, row in agg["tracks"].items()},
        }
        print(json.dumps(out, indent=2, sort_keys=True))
        return 0
    where = "" if name == "builtin" else f" of {name}"
    print(f"agent {args.agent} on the held-out {args.split} split{where}: {len(scores)} runs ({agg['nulls']} null)")
    print(f"{'track':<16}{'Overall':>9}{'Agentic':>9}{'Task':>9}")
    for track, row in agg["tracks"].items():
        print(
            f"{track:<16}"
            + "".join(f"{pct(row[m]) if row[m] is not None else 'null':>9}" for m in ("overall", "agentic", "task"))
        )
    print(
        f"{'mean':<16}"
        + "".join(f"{pct(agg[m]) if agg[m] is not None else 'null':>9}" for m in ("overall", "agentic", "task"))
    )
    return 0


def _fingerprints(args: argparse.Namespace) -> int:
    from bat.leakage.heldout import collect_heldout_entries
    from bat.state.jsonl import write_jsonl

    cfg = _config_of(args)
    entries = collect_heldout_entries(cfg, _secret(args))
    count = write_jsonl(args.out, [{"kind": e.kind, "value": e.value, "source": e.source} for e in entries])
    print(f"wrote {count} held-out fingerprint entries to {args.out}")
    return 0


def _show(args: argparse.Namespace) -> int:
    from bat.benchmark import TRACKS, generate_instance

    if args.track not in TRACKS or args.space not in ("heldout", "practice"):
        print(
            f"bat benchmark: track must be one of {list(TRACKS)} and space one of ['heldout', 'practice']",
            file=sys.stderr,
        )
        return 2
    inst = generate_instance(args.track, args.space, args.seed)
    print(inst.files[wf.BRIEF].decode())
    print(f"pitfalls: {inst.pitfalls}\nfitting model: {inst.fitting_model}; required package: {inst.required_package}")
    print("files: " + ", ".join(sorted(inst.files)))
    return 0


def _config_of(args: argparse.Namespace) -> Any:
    """The config of `--config`/`--set` (defaults otherwise), with `--runtime` applied to `benchmark.runtime`."""
    from bat.config import load_config
    from bat.config.root import BatConfig

    cfg = load_config(args.config, args.overrides) if (args.config or args.overrides) else BatConfig()
    if getattr(args, "runtime", ""):
        cfg = cfg.model_copy(update={"benchmark": cfg.benchmark.model_copy(update={"runtime": args.runtime})})
    return cfg


def _list(args: argparse.Namespace) -> int:
    from bat.staged import registry

    cfg, rows, broken = _config_of(args), [], []
    for name in registry.names():
        try:
            rows.append(registry.load(name, cfg).describe())
        except Exception as exc:  # a broken plug-in is reported, the others still listed
            broken.append(f"bat benchmark list: {name}: cannot load ({type(exc).__name__}: {exc})")
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(f"{'name':<12}{'stages':<34}tracks")
        for row in rows:
            print(f"{row['name']:<12}{','.join(row['stages']):<34}{','.join(row['tracks'])}")
    for line in broken:
        print(line, file=sys.stderr)
    return 2 if broken else 0


def _check(args: argparse.Namespace) -> int:
    import tempfile

    from bat.benchmark.conformance import check
    from bat.staged import registry

    try:
        bench = registry.load(args.name, _config_of(args))
        with tempfile.TemporaryDirectory(prefix="bat-check-") as tmp:
            failures = check(bench, tmp, seed=args.seed, count=args.count)
    except registry.UnknownBenchmarkError as exc:
        failures = [str(exc)]
    except Exception as exc:  # the author's code raised: say where, not a traceback
        failures = [f"raised {type(exc).__name__}: {exc} (tools, tasks and grading must not raise on valid input)"]
    for line in failures:
        print(f"bat benchmark check {args.name}: {line}", file=sys.stderr)
    if failures:
        return 2
    print(f"{args.name}: conforms (stages {[s.key for s in bench.stages()]}, tracks {list(bench.tracks())})")
    return 0


def _sft_rows(args: argparse.Namespace) -> int:
    from pathlib import Path

    from bat.bank.plugin_sft import plugin_sft_rows
    from bat.staged import registry
    from bat.state.jsonl import write_jsonl

    cfg = _config_of(args)
    try:
        bench = registry.load(args.name, cfg)
    except registry.UnknownBenchmarkError as exc:
        print(f"bat benchmark: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    if out.exists() and any(out.iterdir()):
        print(
            f"bat benchmark sft-rows: {out} is not empty; rows are never overwritten: name a new folder",
            file=sys.stderr,
        )
        return 2
    seed = cfg.benchmark.practice_seed if args.seed is None else args.seed
    rows, stats = plugin_sft_rows(bench, cfg, seed=seed, count=args.count)
    for split, items in rows.items():
        write_jsonl(out / f"{split}.jsonl", items)
    kept = dict(stats.kept)
    print(f"wrote {len(rows['train'])} train and {len(rows['validation'])} validation rows to {out} (kept {kept})")
    return 0


def _config_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=None, help="YAML config (default: built-in defaults)")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="config override"
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("benchmark", help="score a built-in scripted agent on the held-out suite")
    sub = parser.add_subparsers(dest="benchmark_command", metavar="ACTION", required=True)
    run = sub.add_parser("run", help="run a scripted agent on the held-out suite and print Overall/Agentic/Task")
    run.add_argument(
        "--agent", default="expert", help="expert | noop | skip-validate (teacher variants: recovery, failure)"
    )
    run.add_argument("--track", default="", help="only this track (default: every track of the suite)")
    run.add_argument("--benchmark", default="", help="benchmark name (default: the config's benchmark.name)")
    run.add_argument("--split", default="controller", help="held-out split: controller | final | test")
    run.add_argument("--runtime", default="", choices=["", "sandbox", "inprocess"], help="override benchmark.runtime")
    run.add_argument("--json", action="store_true", help="print JSON instead of a table")
    _config_args(run)
    run.add_argument(
        "--state",
        default="",
        help="use the held-out suite of this run directory (default: your own "
        "standalone suite, ~/.cache/bat/heldout_secret)",
    )
    run.set_defaults(handler=_run)
    fp = sub.add_parser("fingerprints", help="export the held-out fingerprint entries (for the leakage index) as JSONL")
    fp.add_argument("--out", required=True, help="output JSONL file")
    _config_args(fp)
    fp.add_argument(
        "--state",
        default="",
        help="the held-out suite of this run directory (default: your own "
        "standalone suite, ~/.cache/bat/heldout_secret)",
    )
    fp.set_defaults(handler=_fingerprints)
    show = sub.add_parser("show", help="print one generated instance: brief, pitfalls, files (debugging aid)")
    show.add_argument("--track", required=True, help="track name")
    show.add_argument("--space", default="practice", help="heldout | practice")
    show.add_argument("--seed", type=int, default=0, help="instance seed")
    show.set_defaults(handler=_show)
    lst = sub.add_parser("list", help="the staged benchmarks available by name, with their stages and tracks")
    lst.add_argument("--json", action="store_true", help="a JSON list of {name, version, stages, tracks}")
    _config_args(lst)
    lst.set_defaults(handler=_list)
    chk = sub.add_parser("check", help="conformance of a staged benchmark to the interface (exit 2 listing failures)")
    chk.add_argument("name", help="benchmark name (see `bat benchmark list`)")
    chk.add_argument("--seed", type=int, default=7, help="seed of the tasks checked")
    chk.add_argument("--count", type=int, default=1, help="tasks per track and split")
    chk.add_argument("--runtime", default="", choices=["", "sandbox", "inprocess"], help="override benchmark.runtime")
    _config_args(chk)
    chk.set_defaults(handler=_check)
    rows = sub.add_parser(
        "sft-rows", help="SFT rows from a benchmark's scripted expert on practice tasks (train/validation)"
    )
    rows.add_argument("name", help="benchmark name (see `bat benchmark list`)")
    rows.add_argument("--out", required=True, help="new folder for train.jsonl and validation.jsonl")
    rows.add_argument("--count", type=int, default=8, help="practice tasks per track")
    rows.add_argument("--seed", type=int, default=None, help="practice seed (default: benchmark.practice_seed)")
    _config_args(rows)
    rows.set_defaults(handler=_sft_rows)
