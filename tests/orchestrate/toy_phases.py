"""Test-only phase functions (registered through `orchestrate.phase_overrides`, never the product table).

Each phase reads its upstream phase's output digest and writes `BAT_TOY_SHARDS` JSONL shards whose rows
derive from (seed, upstream digest); it resumes by skipping finished shards and sleeps `BAT_TOY_SLEEP`
seconds per shard (only the `BAT_TOY_SLOW` "round:phase" pairs when set) so tests can interrupt it mid-way. Outputs are therefore identical however often a
phase is interrupted, and a lost or duplicated row changes the digests.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from bat.phase.context import PhaseContext, PhaseResult
from bat.state.digest import sha256_path
from bat.state.jsonl import read_jsonl, write_jsonl

ROWS_PER_SHARD = 3
UPSTREAM = {  # phase -> (round offset, phase) it reads
    "synthesize": None,
    "scan": (0, "synthesize"),
    "sft": (0, "scan"),
    "rollout": (-1, "route"),
    "verify": (0, "rollout"),
    "grpo": (0, "verify"),
    "evaluate": None,
    "route": (0, "evaluate"),
    "final_test": (0, "route"),
}


def _upstream(ctx: PhaseContext) -> Path | None:
    if ctx.phase == "evaluate":
        return ctx.layout.phase_dir(ctx.round, "sft" if ctx.round == 0 else "grpo")
    link = UPSTREAM[ctx.phase]
    return None if link is None else ctx.layout.phase_dir(ctx.round + link[0], link[1])


def _run(ctx: PhaseContext) -> PhaseResult:
    shards = int(os.environ.get("BAT_TOY_SHARDS", "4"))
    slow = os.environ.get("BAT_TOY_SLOW", "")  # "r:phase" pairs (e.g. "0:sft 1:grpo") that sleep; "" = all
    delay = float(os.environ.get("BAT_TOY_SLEEP", "0"))
    if slow and f"{ctx.round}:{ctx.phase}" not in slow.split():
        delay = 0.0
    upstream = _upstream(ctx)
    if upstream is not None and not (upstream / "DONE.json").exists():
        raise RuntimeError(f"toy {ctx.phase}: upstream {upstream} is not DONE")
    digest = sha256_path(upstream) if upstream is not None else "root"
    outputs = []
    for i in range(shards):
        path = ctx.phase_dir / f"shard_{i:03d}.jsonl"
        outputs.append(path)
        if path.exists():
            continue  # finished before an interruption
        time.sleep(delay)
        rows = [
            {
                "phase": ctx.phase,
                "round": ctx.round,
                "shard": i,
                "row": j,
                "upstream": digest,
                "value": ctx.seed("row", i, j),
            }
            for j in range(ROWS_PER_SHARD)
        ]
        write_jsonl(path, rows)
    total = sum(len(read_jsonl(p)) for p in outputs)
    if os.environ.get("BAT_TOY_PROBE"):  # container tests: what this phase sees (paths, its job via squeue)
        _probe(ctx, os.environ["BAT_TOY_PROBE"].split(os.pathsep))
    if ctx.phase == "route":  # the curriculum router's decision record; next_round null ends the run
        stop = os.environ.get("BAT_TOY_STOP_AT") == str(ctx.round)
        decision = ctx.layout.round(ctx.round).decision
        decision.write_text(json.dumps({"next_round": None if stop else ctx.round + 1}), encoding="utf-8")
        outputs.append(decision)
    return PhaseResult(outputs=outputs, inputs=[upstream] if upstream else [], counts={"rows": total})


def _probe(ctx: PhaseContext, paths: list[str]) -> None:
    """Write `probe.json` in the phase folder: which of `paths` exist here and `squeue`'s answer for this job."""
    import shutil
    import subprocess

    job = os.environ.get("SLURM_JOB_ID", "")
    out = subprocess.run(["squeue", "-h", "-j", job, "-o", "%i %T"], capture_output=True, text=True, check=False)
    probe = {
        "exists": {path: os.path.exists(path) for path in paths},
        "sbatch": shutil.which("sbatch"),
        "squeue": out.stdout.strip(),
        "squeue_rc": out.returncode,
    }
    (ctx.phase_dir / "probe.json").write_text(json.dumps(probe), encoding="utf-8")


synthesize = scan = sft = rollout = verify = grpo = evaluate = route = final_test = _run


def overrides() -> list[str]:
    """`--set` overrides that register these toy phases for every phase."""
    return [f"orchestrate.phase_overrides.{p}=toy_phases:{p}" for p in UPSTREAM]


def toy_config(executor: str = "local", rounds: int = 1, extra: list[str] | None = None):
    """A BatConfig running these toy phases with small Slurm resources (mem 0.5 GB, fast polling)."""
    from bat.config import load_config

    small = [f"orchestrate.resources.{p}.mem_gb=0.5" for p in UPSTREAM] + [
        f"orchestrate.resources.{p}.cpus=1" for p in UPSTREAM
    ]
    return load_config(
        None,
        [
            *overrides(),
            *small,
            f"run.rounds={rounds}",
            f"orchestrate.executor={executor}",
            "orchestrate.poll_s=0.5",
            "evaluate.test_split=false",
            *(extra or []),
        ],
    )


def output_digests(state_root: Path) -> dict[str, str | None]:
    """`round_NN/phase` -> digest of that phase's outputs (DONE.json excluded) for every finished phase."""
    result = {}
    for done in sorted(Path(state_root).glob("round_*/*/DONE.json")):
        result[f"{done.parent.parent.name}/{done.parent.name}"] = sha256_path(done.parent)
    return result


def row_count(state_root: Path) -> int:
    """Total rows over every shard of every phase (a lost or duplicated row changes it)."""
    return sum(len(read_jsonl(p)) for p in Path(state_root).glob("round_*/*/shard_*.jsonl"))


def event_pid(state_root: Path, round_index: int, phase: str, message: str = "start") -> int | None:
    """pid of the last process that logged `r{NN} {phase}: {message}` in events.log."""
    log = Path(state_root) / "events.log"
    if not log.exists():
        return None
    pid = None
    for line in log.read_text().splitlines():
        if f" r{round_index:02d} {phase}: {message}" in line:
            pid = int(line.split(" pid=")[1].split()[0])
    return pid
