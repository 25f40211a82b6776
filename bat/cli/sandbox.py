"""`bat sandbox selftest` (are escapes contained on this node?) and `bat sandbox exec` (one call, record as JSON)."""

from __future__ import annotations

import argparse
import json
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("sandbox", help="check and exercise the tool sandbox")
    sub = parser.add_subparsers(dest="sandbox_command", metavar="ACTION", required=True)

    selftest = sub.add_parser("selftest", help="run every known escape attempt; exit 1 unless all are contained")
    selftest.add_argument("--runtime", default="bwrap", help="isolating runtime to check (default bwrap)")
    selftest.add_argument("--only", nargs="*", default=None, metavar="NAME", help="run only these escapes")
    selftest.add_argument("--warm", action="store_true", help="run the calls through a warm tool server")
    selftest.add_argument("--json", action="store_true", help="print rows as JSON")
    selftest.set_defaults(handler=_selftest)

    run = sub.add_parser("exec", help="run one tool call or code snippet in a workspace; print the execution record")
    run.add_argument("--workspace", required=True, help="workspace directory (made writable for the call)")
    run.add_argument("--runtime", default="bwrap", help="bwrap | process | apptainer")
    run.add_argument("--protect", action="append", default=[], metavar="DIR", help="protected (grader) path")
    run.add_argument("--timeout", type=float, default=10.0, help="wall-clock limit in seconds")
    what = run.add_mutually_exclusive_group(required=True)
    what.add_argument("--tool", help="pkg.module:function")
    what.add_argument("--python", help="python code")
    what.add_argument("--bash", help="bash code")
    run.add_argument("--args", default="{}", help="tool arguments as a JSON object")
    run.set_defaults(handler=_exec)


def _config(runtime: str, **fields: float | bool):
    from pydantic import ValidationError

    from bat.config.sandbox import SandboxConfig

    try:
        return SandboxConfig(runtime=runtime, **fields)
    except ValidationError as exc:
        raise ValueError(f"{exc.errors()[0]['msg']} (runtime {runtime!r}; valid: bwrap, process, apptainer)") from exc


def _selftest(args: argparse.Namespace) -> int:
    from bat.sandbox.selftest import run_selftest

    try:
        rows = run_selftest(_config(args.runtime, warm=args.warm), args.only)
    except (ValueError, RuntimeError) as exc:
        print(f"bat sandbox selftest: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([{**row.__dict__, "passed": row.passed} for row in rows], indent=2))
    else:
        for row in rows:
            status = "ok  " if row.passed else "FAIL"
            print(
                f"{status} {row.name:<24} expects {row.flag:<18} raised {','.join(row.raised) or '-':<32}"
                f" contained={row.contained} next_call={row.next_call_ok} {row.seconds:.2f}s"
            )
    return 0 if all(row.passed for row in rows) else 1


def _exec(args: argparse.Namespace) -> int:
    from bat.sandbox import Sandbox

    try:
        sandbox = Sandbox(args.workspace, _config(args.runtime, timeout_s=args.timeout), protected_paths=args.protect)
        if args.tool:
            tool_args = json.loads(args.args)
            if not isinstance(tool_args, dict):
                raise ValueError("--args must be a JSON object")
            record = sandbox.call_tool(args.tool, tool_args)
        else:
            language = "python" if args.python is not None else "bash"
            record = sandbox.execute_code(language, args.python if args.python is not None else args.bash)
    except (ValueError, RuntimeError) as exc:
        print(f"bat sandbox exec: {exc}", file=sys.stderr)
        return 2
    print(record.model_dump_json(indent=2))
    return 0 if record.ok else 1
