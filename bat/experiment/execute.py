"""Run one arm x seed in its own state dir through the ordinary driver, then its end-of-run evaluation.

Reads: the experiment spec and the seed's shared bootstrap. Writes: the arm state dir (seeded from the shared
bootstrap, then driver outputs), `round_NN/final_test/` (retained best on final/test) and
`experiment_arm.json` (status, wall seconds, error) written last. A finished arm (status `done`) is skipped on rerun;
a failed one is recorded (every run is reported) and retried on the next invocation. While an attempt runs,
`experiment_attempt.json` holds its start; one found on the next invocation is an attempt stopped from outside
(the machine stopped, a preemption), counted in the record with its wall read from the newest file it wrote.
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path
from typing import Any

from bat.experiment.records import read_record, write_record
from bat.experiment.share import SharedInfo, arm_dir, seed_arm_state
from bat.experiment.spec import ArmSpec, ExperimentSpec, arm_config
from bat.schemas.experiment import ArmRecord, AttemptRecord
from bat.state.experiment_layout import ExperimentRunFiles
from bat.state.layout import RunLayout
from bat.state.markers import read_done

FINAL_PHASE = "final_test"
TRAINED_TARGET = "bat.evaluate.phase:run_final_test"
"""Retained best (`checkpoints/best.json`) on the final (+ test) split."""
BASE_TARGET = "bat.experiment.base_eval:final_test_base"
"""Untrained base model on the same splits."""


def final_table(config: Any, target: str) -> dict:
    """The product phase table plus a `final_test` row pointing at `target` (evaluation resources)."""
    from dataclasses import replace

    from bat.orchestrate.graph import resolve_table, with_target

    table = resolve_table(config)
    return {**table, FINAL_PHASE: replace(with_target(table[FINAL_PHASE], target), resources="evaluate")}


def last_routed_round(layout: RunLayout) -> int:
    """The last round whose `route` is DONE (where the retained best was last decided)."""
    routed = [r for r in layout.rounds() if read_done(layout.phase_dir(r, "route")) is not None]
    if not routed:
        raise RuntimeError(f"{layout.root}: no round has a DONE route; the arm did not finish round 0")
    return routed[-1]


def read_arm_record(spec: ExperimentSpec, seed: int, arm: str) -> ArmRecord | None:
    """The arm x seed's `experiment_arm.json`, None when its run has not ended on this disk."""
    return read_record(ExperimentRunFiles(arm_dir(spec, seed, arm)).arm_record, ArmRecord)


def open_attempt(root: Path) -> AttemptRecord | None:
    """The open attempt's `experiment_attempt.json` in the arm state dir `root` (an attempt running now, or one
    stopped from outside), None when no attempt is open."""
    return read_record(ExperimentRunFiles(root).attempt, AttemptRecord)


def stopped_attempts(root: Path) -> tuple[int, float]:
    """Attempts of the arm run in `root` stopped from outside since its record was last written, and their wall
    seconds: the open `experiment_attempt.json` (its start to the newest file written under `root` since) plus the
    earlier stopped attempts it carries; (0, 0.0) when `root` holds no open attempt."""
    attempt = open_attempt(root)
    if attempt is None:
        return 0, 0.0
    marker = ExperimentRunFiles(root).attempt
    newest = attempt.started_at
    for path in root.rglob("*"):
        if path != marker and path.is_file() and not path.is_symlink():
            newest = max(newest, path.stat().st_mtime)
    return attempt.stopped_attempts + 1, round(attempt.stopped_wall_s + newest - attempt.started_at, 3)


def _run_trained(cfg: Any, layout: RunLayout, allow_config_change: bool) -> int:
    from bat.orchestrate.driver import run
    from bat.orchestrate.executors import executor_kind
    from bat.orchestrate.runner import run_phase

    code = run(cfg, layout, wait=executor_kind(cfg) == "slurm", allow_config_change=allow_config_change)
    if code != 0:
        raise RuntimeError(f"driver exited {code} for {layout.root}")
    final_round = last_routed_round(layout)
    run_phase(cfg, layout, final_round, FINAL_PHASE, table=final_table(cfg, TRAINED_TARGET))
    return final_round


def _run_base(cfg: Any, layout: RunLayout, allow_config_change: bool) -> int:
    from bat.config.run_record import open_run
    from bat.orchestrate.runner import run_phase

    open_run(layout, cfg, allow_config_change=allow_config_change)
    run_phase(cfg, layout, 0, FINAL_PHASE, table=final_table(cfg, BASE_TARGET))
    return 0


def run_arm(
    spec: ExperimentSpec, arm: ArmSpec, seed: int, shared: SharedInfo, *, allow_config_change: bool = False
) -> ArmRecord:
    """Run (or resume) one arm x seed; returns its `experiment_arm.json` record (status `done` or `failed`).

    `allow_config_change` is passed to `open_run`: a run whose resolved config changed resumes instead of failing.
    """
    from bat.config.load import config_hash

    previous = read_arm_record(spec, seed, arm.name)
    if previous is not None and previous.status == "done":
        return previous
    root = arm_dir(spec, seed, arm.name)
    files = ExperimentRunFiles(root)
    stopped, stopped_wall = stopped_attempts(root)
    record = ArmRecord(
        arm=arm.name,
        kind=arm.kind,
        seed=seed,
        overrides=list(arm.overrides),
        shared_sft_digest=shared.sft_digest,
        shared_wall_s=shared.wall_s,
        attempts=(previous.attempts if previous else 0) + stopped + 1,
        interrupted_attempts=(previous.interrupted_attempts if previous else 0) + stopped,
    )
    started = time.monotonic()
    print(f"bat experiment: arm {arm.name} seed {seed} -> {root}", flush=True)
    try:
        cfg = arm_config(spec, arm, seed)
        layout = seed_arm_state(shared, root, models_only=arm.kind == "base")
        attempt = AttemptRecord(started_at=time.time(), stopped_attempts=stopped, stopped_wall_s=stopped_wall)
        write_record(files.attempt, attempt)  # carries the stopped ones until a record counts them
        record.config_hash = config_hash(cfg)
        run_one = _run_base if arm.kind == "base" else _run_trained
        record.final_round = run_one(cfg, layout, allow_config_change)
        record.status = "done"
    except Exception as exc:  # every run is reported, including the ones that fail; the others still run
        record.status, record.error = "failed", f"{type(exc).__name__}: {exc}"
        record.traceback = traceback.format_exc(limit=6)
        print(f"bat experiment: arm {arm.name} seed {seed} FAILED: {record.error}", flush=True)
    earlier_wall = (previous.wall_s if previous else 0.0) + stopped_wall
    record.wall_s = round(time.monotonic() - started + earlier_wall, 3)
    root.mkdir(parents=True, exist_ok=True)
    write_record(files.arm_record, record)
    files.attempt.unlink(missing_ok=True)
    return record
