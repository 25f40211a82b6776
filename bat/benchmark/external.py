"""External-evaluator adapter: run a command (no shell) that writes per-run cells; validate them strictly.

Command template: an argv list whose elements may be exactly `{checkpoint}`, `{request}` or `{output}`
(whole-argument placeholders; a placeholder inside a longer argument is refused). The request file
(JSON, `REQUEST_VERSION`) tells the evaluator what to run: {"request_version", "checkpoint", "split" (controller,
final or test: an evaluator keeps its untouched test tasks for "test"), "run": {"run_dir", "round", "phase",
"variant", "config_hash"} (who asks: the same identities ask again only on a resume), "tracks" (the benchmark's own
names), "repeats" (per track on this split), "stages": [keys] (the configured stage keys, any names), "output"}.
The output file must be {"cells": [{"track", "task_id", "repeat", "valid", "task", "stages": {key: score}}]}
with scores in [0, 1] or null, exactly the configured stage keys, no duplicate (track, task_id, repeat),
and every requested (track, repeat) present. Agentic and Overall are computed here by the contract.
docs/byo-benchmark.md shows a request and its cells.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bat.benchmark.contract import agentic, overall
from bat.benchmark.score import RunScore
from bat.state.atomic import atomic_write_json

PLACEHOLDERS = ("{checkpoint}", "{request}", "{output}")
REQUEST_VERSION = 2
"""2: the request carries the split and the run identities."""


class ExternalError(ValueError):
    """The external evaluator failed or wrote output that does not validate (message says what is wrong)."""


class ExternalCell(BaseModel):
    """One run reported by the external evaluator."""

    model_config = ConfigDict(extra="forbid")

    track: str
    task_id: str = Field(min_length=1)
    repeat: int = Field(ge=0)
    valid: bool
    task: float | None = Field(ge=0.0, le=1.0)
    stages: dict[str, float | None]


def build_argv(command: tuple[str, ...] | list[str], values: dict[str, str]) -> list[str]:
    """Substitute whole-argument placeholders; refuse embedded or unknown placeholders."""
    if not command:
        raise ExternalError("external command is empty; set benchmark.external.command to an argv list")
    argv = []
    for arg in command:
        if arg in PLACEHOLDERS:
            argv.append(values[arg.strip("{}")])
        elif re.search(r"\{[A-Za-z_]+\}", arg):
            raise ExternalError(f"argument {arg!r}: placeholders must be whole arguments; valid: {list(PLACEHOLDERS)}")
        else:
            argv.append(arg)
    return argv


def parse_cells(
    path: str | Path, tracks: tuple[str, ...], repeats: int, stage_keys: tuple[str, ...]
) -> list[ExternalCell]:
    """Read and validate the evaluator's output file; raises ExternalError naming the first problem."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ExternalError(f"{p}: unreadable evaluator output ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise ExternalError(f"{p}: expected an object with a 'cells' list")
    cells, seen = [], set()
    for n, raw in enumerate(data["cells"]):
        try:
            cell = ExternalCell.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise ExternalError(f"{p}: cells[{n}].{'.'.join(map(str, first['loc']))}: {first['msg']}") from exc
        if cell.track not in tracks:
            raise ExternalError(f"{p}: cells[{n}]: unknown track {cell.track!r}; valid: {list(tracks)}")
        if cell.repeat >= repeats:
            raise ExternalError(f"{p}: cells[{n}]: repeat {cell.repeat} out of range [0, {repeats})")
        if set(cell.stages) != set(stage_keys):
            raise ExternalError(f"{p}: cells[{n}]: stages {sorted(cell.stages)} must be exactly {list(stage_keys)}")
        bad = {k: v for k, v in cell.stages.items() if v is not None and not 0.0 <= v <= 1.0}
        if bad:
            raise ExternalError(f"{p}: cells[{n}]: stage scores out of [0, 1]: {bad}")
        key = (cell.track, cell.task_id, cell.repeat)
        if key in seen:
            raise ExternalError(f"{p}: cells[{n}]: duplicate cell {key}")
        seen.add(key)
        cells.append(cell)
    missing = sorted({(t, r) for t in tracks for r in range(repeats)} - {(c.track, c.repeat) for c in cells})
    if missing:
        raise ExternalError(
            f"{p}: missing cells for (track, repeat) {missing[:10]}{' ...' if len(missing) > 10 else ''}"
        )
    return cells


def cell_to_score(cell: ExternalCell, stages: Any) -> RunScore:
    """RunScore of one external cell (Agentic/Overall by the contract; invalid or null cells stay null)."""
    stage_scores = {s.key: cell.stages[s.key] for s in stages}
    ag = agentic(stage_scores, stages) if cell.valid else None
    task = cell.task if cell.valid else None
    nulls = (
        []
        if cell.valid and ag is not None and task is not None
        else [f"external cell {cell.track}/{cell.task_id}/{cell.repeat} is null or invalid"]
    )
    return RunScore(
        run_id=f"{cell.track}-{cell.task_id}-r{cell.repeat:02d}",
        track=cell.track,
        instance_id=cell.task_id,
        repeat=cell.repeat,
        stages=stage_scores,
        items={},
        task=task,
        agentic=ag,
        overall=overall(task, ag),
        valid=not nulls,
        null_reasons=nulls,
        judge="external",
    )


def run_external(
    checkpoint: str | Path,
    workdir: str | Path,
    config: Any = None,
    *,
    split: str = "controller",
    run: dict[str, Any] | None = None,
) -> list[RunScore]:
    """Write the request for held-out `split` on behalf of `run` (run_dir, round, phase, variant, config_hash), run
    the configured command, validate its output; one RunScore per cell."""
    from bat.config.root import BatConfig

    cfg = config or BatConfig()
    bench = cfg.benchmark
    work = Path(workdir)
    request, output = work / "request.json", work / "cells.json"
    keys = tuple(s.key for s in cfg.stages)
    repeats = bench.repeats_for(split)
    identity = {"run_dir": "", "round": None, "phase": "", "variant": None, "config_hash": "", **(run or {})}
    atomic_write_json(
        request,
        {
            "request_version": REQUEST_VERSION,
            "checkpoint": str(checkpoint),
            "split": split,
            "run": identity,
            "tracks": list(bench.tracks),
            "repeats": repeats,
            "stages": list(keys),
            "output": str(output),
        },
    )
    argv = build_argv(
        bench.external.command, {"checkpoint": str(checkpoint), "request": str(request), "output": str(output)}
    )
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=bench.external.timeout_s, check=False)
    except FileNotFoundError as exc:
        raise ExternalError(f"external evaluator not found: {argv[0]!r}") from exc
    except subprocess.TimeoutExpired as exc:
        raise ExternalError(f"external evaluator timed out after {bench.external.timeout_s} s") from exc
    if proc.returncode != 0:
        raise ExternalError(f"external evaluator exited {proc.returncode}: {proc.stderr[-500:]}")
    cells = parse_cells(output, tuple(bench.tracks), repeats, keys)
    return [cell_to_score(c, cfg.stages) for c in cells]
