"""`bat bench sandbox`: per-tool-call overhead of the `process` and `bwrap` runtimes side by side (cold:
one fresh sandbox per call; warm: calls forked from one sandboxed tool server), and one full
scripted-expert episode per track under each (when `bat.benchmark.run_episode` exists)."""

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

HELP = "per-tool-call sandbox overhead (median ms), process vs bwrap, cold vs warm; expert episode s per track"
TOOL = "bat.sandbox.tools:list_files"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--calls", type=int, default=15, help="calls per measurement (median reported)")
    parser.add_argument("--runtimes", default="process,bwrap", help="comma-separated runtimes to compare")
    parser.add_argument("--tracks", default="", help="comma-separated tracks for the episode timing (default: all)")
    parser.add_argument("--no-episodes", action="store_true", help="skip the scripted-expert episode timing")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000.0, 1)


def _columns(runtimes: list[str]) -> list[tuple[str, str, bool]]:
    """(label, runtime, warm) for every runtime, cold then warm."""
    return [(f"{r}{'+warm' if warm else ''}", r, warm) for warm in (False, True) for r in runtimes]


def _bare_host_ms(workspace: Path, calls: int) -> float:
    """Median ms of `python -m bat.sandbox.toolhost` run directly (no runtime, no limits): the cold floor."""
    request = json.dumps({"kind": "tool", "tool": TOOL, "args": {}, "workspace": str(workspace)})
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "bat.sandbox.toolhost"],
            input=request,
            capture_output=True,
            text=True,
            check=True,
            cwd="/",
        )
        samples.append(time.perf_counter() - start)
    return _median_ms(samples)


def _call_ms(runtime: str, warm: bool, workspace: Path, calls: int) -> dict[str, float]:
    """Median ms of a trivial tool call and of `execute_code bash true` under one runtime/mode."""
    from bat.config.sandbox import SandboxConfig
    from bat.sandbox import Sandbox

    config = SandboxConfig(runtime=runtime, warm=warm, preload=("bat.sandbox.tools",))  # type: ignore[arg-type]
    with Sandbox(workspace, config) as sandbox:
        sandbox.call_tool(TOOL, {})  # warm-up (starts the server in warm mode)
        tool, bash = [], []
        for _ in range(calls):
            record = sandbox.call_tool(TOOL, {})
            if not record.ok:
                raise RuntimeError(f"{runtime}: tool call failed: {record.error} {record.stderr[-300:]}")
            tool.append(record.duration_s)
            bash.append(sandbox.execute_code("bash", "true").duration_s)
    return {"tool_call_ms": _median_ms(tool), "bash_true_ms": _median_ms(bash)}


def _tool_modules(benchmark: Any) -> tuple[str, ...]:
    """What a warm server should preload: the benchmark's tool modules and its per-track modules."""
    import importlib.util

    try:
        from bat.benchmark.tools.specs import TOOLS
    except ImportError:
        return ()
    modules = {tool.ref.split(":")[0] for tool in TOOLS if ":" in tool.ref}
    for track in getattr(benchmark, "TRACKS", ()):
        name = f"bat.benchmark.tracks.{track}"
        if importlib.util.find_spec(name) is not None:
            modules.add(name)
    return tuple(sorted(modules))


def _episodes(runtimes: list[str], tracks: list[str]) -> dict[str, Any]:
    """Seconds and Overall of one scripted-expert episode per track and runtime/mode."""
    try:
        import bat.benchmark as benchmark
    except ImportError as exc:
        return {"unavailable": f"bat.benchmark does not import ({exc})"}
    if not hasattr(benchmark, "run_episode") or not hasattr(benchmark, "TRACKS"):
        return {"unavailable": "bat.benchmark.run_episode/TRACKS are not provided yet"}
    from bat.config.benchmark import BenchmarkConfig
    from bat.config.root import BatConfig
    from bat.config.sandbox import SandboxConfig

    preload = _tool_modules(benchmark)
    configs = {
        label: BatConfig(sandbox=SandboxConfig(runtime=r, warm=warm, preload=preload))  # type: ignore[arg-type]
        for label, r, warm in _columns(runtimes)
    }
    if "runtime" in BenchmarkConfig.model_fields:  # the benchmark's unisolated in-process runner, as a floor
        configs = {"inprocess": BatConfig(benchmark=BenchmarkConfig(runtime="inprocess")), **configs}
    out: dict[str, Any] = {}
    for track in tracks or list(benchmark.TRACKS):
        out[track] = {}
        for label, config in configs.items():
            with tempfile.TemporaryDirectory(prefix="bat-bench-episode-") as workdir:
                start = time.perf_counter()
                episode = benchmark.run_episode(track, "expert", workdir=Path(workdir), config=config)
                seconds = time.perf_counter() - start
            overall = getattr(episode.score, "overall", None)
            out[track][label] = {
                "seconds": round(seconds, 2),
                "overall": None if overall is None else round(100 * overall, 1),
                "breach": bool(getattr(episode.score, "breach", False)),
            }
    return out


def run(args: argparse.Namespace) -> int:
    """Measure and print; exit 2 on bad arguments, 1 when a runtime cannot run here."""
    from bat.sandbox import RUNTIMES, bwrap_available

    runtimes = [r for r in args.runtimes.split(",") if r]
    unknown = [r for r in runtimes if r not in RUNTIMES or r == "apptainer"]
    if unknown or not runtimes or args.calls < 1:
        print(
            f"bad arguments: runtimes {unknown or runtimes} (valid: process, bwrap), calls {args.calls} (>= 1)",
            file=sys.stderr,
        )
        return 2
    if "bwrap" in runtimes and not bwrap_available():
        print("bwrap is not usable here (apt-get install bubblewrap); rerun with --runtimes process", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="bat-bench-sandbox-") as tmp:
        workspace = Path(tmp) / "ws"
        (workspace / "data").mkdir(parents=True)
        (workspace / "data" / "case.txt").write_text("1 2 3\n")
        result: dict[str, Any] = {"calls": args.calls, "bare_toolhost_ms": _bare_host_ms(workspace, args.calls)}
        result["modes"] = {label: _call_ms(r, warm, workspace, args.calls) for label, r, warm in _columns(runtimes)}
    modes = result["modes"]
    ratios = {}
    if "process" in modes and "bwrap" in modes:
        ratios["bwrap/process"] = {k: round(modes["bwrap"][k] / modes["process"][k], 2) for k in modes["process"]}
    for r in runtimes:
        ratios[f"{r} cold/warm"] = {k: round(modes[r][k] / modes[f"{r}+warm"][k], 1) for k in modes[r]}
    result["ratios"] = ratios
    tracks = [t for t in args.tracks.split(",") if t]
    result["episodes"] = {} if args.no_episodes else _episodes(runtimes, tracks)
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        _print_table(result)
    return 0


def _print_table(result: dict[str, Any]) -> None:
    modes, ratios = result["modes"], result["ratios"]
    labels = list(modes) + list(ratios)
    print(f"sandbox overhead per call, median of {result['calls']} calls (ms; ratios as x)")
    print(f"  bare toolhost, no runtime/limits: {result['bare_toolhost_ms']:.1f}")
    print(f"  {'':<14}" + "".join(f"{label:>19}" for label in labels))
    for key in ("tool_call_ms", "bash_true_ms"):
        cells = [f"{modes[m][key]:>19.1f}" for m in modes] + [f"{ratios[r][key]:>18}x" for r in ratios]
        print(f"  {key:<14}" + "".join(cells))
    episodes = result["episodes"]
    if not episodes:
        return
    if "unavailable" in episodes:
        print(f"scripted-expert episodes: {episodes['unavailable']}")
        return
    columns = list(next(iter(episodes.values())))
    print("scripted-expert episode per track: seconds (Overall)")
    print(f"  {'':<16}" + "".join(f"{c:>18}" for c in columns))
    for track, cells in episodes.items():
        row = "".join(f"{cells[c]['seconds']:>10.2f} ({cells[c]['overall']!s:>5})" for c in columns)
        print(f"  {track:<16}{row}")
