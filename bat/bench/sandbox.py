"""`bat bench sandbox`: per-tool-call overhead of the `process` and `bwrap` runtimes side by side, and a
full scripted-expert episode per track under each runtime (when `bat.benchmark.run_episode` exists)."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HELP = "per-tool-call sandbox overhead (median ms) for process vs bwrap, and expert episode seconds per track"
TOOL = "bat.sandbox.tools:list_files"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--calls", type=int, default=15, help="calls per measurement (median reported)")
    parser.add_argument("--runtimes", default="process,bwrap", help="comma-separated runtimes to compare")
    parser.add_argument("--tracks", default="", help="comma-separated tracks for the episode timing (default: all)")
    parser.add_argument("--no-episodes", action="store_true", help="skip the scripted-expert episode timing")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000.0, 1)


def _bare_host_ms(workspace: Path, calls: int) -> float:
    """Median ms of `python -m bat.sandbox.toolhost` run directly (no runtime, no limits): the floor."""
    request = json.dumps({"kind": "tool", "tool": TOOL, "args": {}, "workspace": str(workspace)})
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "bat.sandbox.toolhost"], input=request, capture_output=True,
                       text=True, check=True, cwd="/")
        samples.append(time.perf_counter() - start)
    return _median_ms(samples)


def _runtime_ms(runtime: str, workspace: Path, calls: int) -> dict[str, float]:
    """Median ms of a trivial tool call and of `execute_code bash true` under one runtime."""
    from bat.config.sandbox import SandboxConfig
    from bat.sandbox import Sandbox

    sandbox = Sandbox(workspace, SandboxConfig(runtime=runtime))  # type: ignore[arg-type]
    tool, bash = [], []
    for _ in range(calls):
        record = sandbox.call_tool(TOOL, {})
        if not record.ok:
            raise RuntimeError(f"{runtime}: tool call failed: {record.error} {record.stderr[-300:]}")
        tool.append(record.duration_s)
        bash.append(sandbox.execute_code("bash", "true").duration_s)
    return {"tool_call_ms": _median_ms(tool), "bash_true_ms": _median_ms(bash)}


def _episodes(runtimes: list[str], tracks: list[str]) -> dict[str, Any]:
    """Seconds and Overall of one scripted-expert episode per track and runtime."""
    try:
        import bat.benchmark as benchmark
    except ImportError as exc:
        return {"unavailable": f"bat.benchmark does not import ({exc})"}
    if not hasattr(benchmark, "run_episode") or not hasattr(benchmark, "TRACKS"):
        return {"unavailable": "bat.benchmark.run_episode/TRACKS are not provided yet"}
    from bat.config.root import BatConfig
    from bat.config.sandbox import SandboxConfig

    out: dict[str, Any] = {}
    for track in tracks or list(benchmark.TRACKS):
        out[track] = {}
        for runtime in runtimes:
            config = BatConfig(sandbox=SandboxConfig(runtime=runtime))  # type: ignore[arg-type]
            with tempfile.TemporaryDirectory(prefix="bat-bench-episode-") as workdir:
                start = time.perf_counter()
                episode = benchmark.run_episode(track, "expert", workdir=Path(workdir), config=config)
                seconds = time.perf_counter() - start
            overall = getattr(episode.score, "overall", None)
            out[track][runtime] = {"seconds": round(seconds, 2),
                                   "overall": None if overall is None else round(100 * overall, 1)}
    return out


def run(args: argparse.Namespace) -> int:
    """Measure and print; exit 2 on bad arguments, 1 when a runtime cannot run here."""
    from bat.sandbox import RUNTIMES, bwrap_available

    runtimes = [r for r in args.runtimes.split(",") if r]
    unknown = [r for r in runtimes if r not in RUNTIMES or r == "apptainer"]
    if unknown or args.calls < 1:
        print(f"bad arguments: runtimes {unknown} (valid: process, bwrap), calls {args.calls} (>= 1)", file=sys.stderr)
        return 2
    if "bwrap" in runtimes and not bwrap_available():
        print("bwrap is not usable here (apt-get install bubblewrap); rerun with --runtimes process", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="bat-bench-sandbox-") as tmp:
        workspace = Path(tmp) / "ws"
        (workspace / "data").mkdir(parents=True)
        (workspace / "data" / "case.txt").write_text("1 2 3\n")
        result: dict[str, Any] = {"calls": args.calls, "bare_toolhost_ms": _bare_host_ms(workspace, args.calls)}
        result["runtimes"] = {r: _runtime_ms(r, workspace, args.calls) for r in runtimes}
    if "process" in result["runtimes"] and "bwrap" in result["runtimes"]:
        p, b = result["runtimes"]["process"], result["runtimes"]["bwrap"]
        result["bwrap_over_process"] = {k: round(b[k] / p[k], 2) for k in p}
    tracks = [t for t in args.tracks.split(",") if t]
    result["episodes"] = {} if args.no_episodes else _episodes(runtimes, tracks)
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
        return 0
    _print_table(result, runtimes)
    return 0


def _print_table(result: dict[str, Any], runtimes: list[str]) -> None:
    print(f"sandbox overhead, median of {result['calls']} calls (ms)")
    print(f"  bare toolhost (no runtime, no limits): {result['bare_toolhost_ms']:.1f}")
    print(f"  {'':<22}" + "".join(f"{r:>12}" for r in runtimes) + ("   bwrap/process" if "bwrap_over_process" in result else ""))
    for key in ("tool_call_ms", "bash_true_ms"):
        row = "".join(f"{result['runtimes'][r][key]:>12.1f}" for r in runtimes)
        ratio = f"   {result['bwrap_over_process'][key]:.2f}x" if "bwrap_over_process" in result else ""
        print(f"  {key:<22}{row}{ratio}")
    episodes = result["episodes"]
    if not episodes:
        return
    if "unavailable" in episodes:
        print(f"scripted-expert episodes: {episodes['unavailable']}")
        return
    print("scripted-expert episode per track: seconds (Overall)")
    for track, cells in episodes.items():
        row = "".join(f"{cells[r]['seconds']:>8.2f} ({cells[r]['overall']})" for r in runtimes)
        print(f"  {track:<16}{row}")
