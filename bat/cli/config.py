"""`bat config check FILE [--set k=v ...]`, `bat config plan FILE`, `bat config sbatch FILE` and `bat config show
FILE`: validate before anything is queued, and print the driver job's sbatch flags. For a Slurm run (`orchestrate.executor` slurm, or auto with sbatch on PATH) `check` also refuses
a config whose resource plan does not fit (`bat.orchestrate.plan`)."""

from __future__ import annotations

import argparse
import json


def add_config_arguments(parser: argparse.ArgumentParser, *, required: bool = False) -> None:
    """The shared `--config FILE` / `--set key=value` flags every command that reads config uses."""
    parser.add_argument("--config", required=required, help="YAML config (default: built-in defaults)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="dotted override, repeatable, e.g. --set grpo.lr=1e-6",
    )


def _check(args: argparse.Namespace) -> int:
    from bat.config import config_hash, load_config

    status = 0
    for path in args.files:
        try:
            cfg = load_config(path, args.overrides)
        except Exception as exc:  # ConfigError or unexpected: report per file, keep going
            print(f"FAIL {path}\n{exc}")
            status = 2
            continue
        problems = _slurm_plan_problems(cfg)
        if problems:
            again = " ".join(["bat config plan", str(path), *(f"--set {o}" for o in args.overrides)])
            print(f"FAIL {path}\nresource plan does not fit (details: {again}):\n  " + "\n  ".join(problems))
            status = 2
            continue
        print(f"ok   {path}  (hash {config_hash(cfg)}, run {cfg.run.name}, executor {_executor(cfg)})")
    return status


def _executor(cfg) -> str:
    return str(getattr(cfg.orchestrate, "executor", "?"))


def _slurm_plan_problems(cfg) -> list[str]:
    """The resource plan's problems when the config runs on Slurm; [] for local and debug runs."""
    from bat.orchestrate.executors import executor_kind
    from bat.orchestrate.plan import plan_problems

    return plan_problems(cfg) if executor_kind(cfg) == "slurm" else []


def _plan(args: argparse.Namespace) -> int:
    from bat.config import load_config
    from bat.orchestrate.executors import executor_kind
    from bat.orchestrate.plan import plan_run
    from bat.orchestrate.plan_text import render_plan

    cfg = load_config(args.file, args.overrides)
    cpu_rate = None
    if args.measure_cpu:
        from bat.perf.machine import measure_cpu_gflops

        cpu_rate = measure_cpu_gflops(cfg.model.dtype)
    try:
        shape, source, plans = plan_run(cfg, cpu_rate)
    except ValueError as exc:
        print(f"bat config plan: {exc}")
        return 2
    print(render_plan(shape, source, plans, executor_kind(cfg)))
    return 2 if any(plan.problems for plan in plans) else 0


def _sbatch(args: argparse.Namespace) -> int:
    from bat.config import load_config
    from bat.orchestrate.executors import driver_sbatch_flags

    print(" ".join(driver_sbatch_flags(load_config(args.file, args.overrides))))
    return 0


def _show(args: argparse.Namespace) -> int:
    from bat.config import load_config, resolved_dict

    cfg = load_config(args.file, args.overrides)
    print(json.dumps(resolved_dict(cfg), indent=2, sort_keys=True))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("config", help="validate or print configs")
    sub = parser.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    check = sub.add_parser("check", help="validate config files (exit 2 on the first invalid one)")
    check.add_argument("files", nargs="+", help="YAML config files")
    check.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    check.set_defaults(handler=_check)
    plan = sub.add_parser(
        "plan",
        help="per phase: Slurm request vs GPU memory, host memory, CPUs and time needed (exit 2 if one does not fit)",
    )
    plan.add_argument("file", help="YAML config file")
    plan.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    plan.add_argument(
        "--measure-cpu",
        action="store_true",
        help="time CPU phases with this host's measured matmul rate instead of orchestrate.rates.cpu_gflops",
    )
    plan.set_defaults(handler=_plan)
    sbatch = sub.add_parser(
        "sbatch",
        help="print the sbatch flags of the driver job (orchestrate.resources.driver): "
        "sbatch $(bat config sbatch FILE) run_round.sh",
    )
    sbatch.add_argument("file", help="YAML config file")
    sbatch.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    sbatch.set_defaults(handler=_sbatch)
    show = sub.add_parser("show", help="print the resolved config as JSON")
    show.add_argument("file", nargs="?", default=None)
    show.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    show.set_defaults(handler=_show)
