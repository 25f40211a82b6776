"""One shared bootstrap per seed (bank + SFT checkpoint), and seeding an arm's state dir from it.

Reads: the shared state dir `<experiment>/seed_<s>/_shared/`. Writes: that dir (through the ordinary driver), and
each arm's state dir: a hard-linked copy (falling back to a copy) of the round-0 products, built under a temp name
and renamed into place with `experiment_seed.json` inside (so an interrupted seeding is redone, never half-used).
Every run of an experiment (bootstraps, arms, seeds) gets the experiment's one held-out secret
(`<experiment>/HELDOUT_SECRET`), so all of them are evaluated on the same held-out suite.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from bat.benchmark.secret import install_secret, run_secret
from bat.experiment.records import load_record, write_record
from bat.experiment.spec import SHARED_NAME, ExperimentSpec, bootstrap_seed_of, shared_config
from bat.schemas.experiment import SeedMarker, SharedRecord
from bat.state.atomic import atomic_dir
from bat.state.experiment_layout import ExperimentRunFiles, ExperimentStateLayout
from bat.state.layout import RunLayout
from bat.state.markers import read_done

ROUND0_PHASES = ("synthesize", "scan", "sft", "evaluate")
"""Round-0 phases shared by every arm; the round-0 `route` is arm-dependent and re-runs in each arm."""


class SharedStateError(RuntimeError):
    """The shared bootstrap did not produce what the arms need (the message says what is missing)."""


@dataclass(frozen=True)
class SharedInfo:
    """What the arms of one seed share."""

    seed: int
    layout: RunLayout
    sft_checkpoint: str
    sft_digest: str
    wall_s: float
    """Wall seconds of the shared bootstrap (0 when it was already complete)."""
    compute_s: float
    """Sum of the round-0 phases' `compute_s` (DONE.json)."""


def experiment_secret(spec: ExperimentSpec) -> Path:
    """The experiment's held-out secret, installed into every run it makes (`bat.benchmark.secret`): the committed
    `secret_file` when the spec names one (copied into the state dir first), else one created under `state_dir`."""
    path = ExperimentStateLayout(spec.root).secret
    if spec.secret_file is not None:
        install_secret(spec.secret_file, path)
    return path


def seed_dir(spec: ExperimentSpec, seed: int) -> Path:
    """`<experiment>/seed_<seed>`: every run dir of one seed."""
    return ExperimentStateLayout(spec.root).seed_dir(seed)


def shared_dir(spec: ExperimentSpec, seed: int) -> Path:
    """State dir of the bootstrap serving `seed`: `seed_<b>/_shared` with b = `bootstrap_seed_of(spec, seed)`."""
    return seed_dir(spec, bootstrap_seed_of(spec, seed)) / SHARED_NAME


def arm_dir(spec: ExperimentSpec, seed: int, arm: str) -> Path:
    """`<experiment>/seed_<seed>/<arm>`: the arm x seed's state dir."""
    return ExperimentStateLayout(spec.root).run_dir(seed, arm)


def sft_checkpoint(layout: RunLayout) -> str:
    """The SFT export of round 0 (`layout.candidate_model(0)`), once the `sft` phase is DONE."""
    export = layout.candidate_model(0)
    if read_done(layout.phase_dir(0, "sft")) is None or not export.is_dir():
        raise SharedStateError(f"{layout.phase_dir(0, 'sft')} is not DONE or its export {export} is missing")
    return str(export)


def sft_digest(layout: RunLayout) -> str:
    """sha256 of the SFT export the run's round 0 produced (the same tree digest evaluation records)."""
    from bat.evaluate.manifest import checkpoint_digest

    return checkpoint_digest(sft_checkpoint(layout))


def round0_compute_s(layout: RunLayout) -> float:
    total = 0.0
    for phase in ROUND0_PHASES:
        done = read_done(layout.phase_dir(0, phase))
        total += float(done.extra.get("compute_s", 0.0)) if done else 0.0
    return total


def run_shared(spec: ExperimentSpec, seed: int) -> SharedInfo:
    """Run (or resume) the bootstrap serving `seed` once through the ordinary driver; returns what the arms share."""
    from bat.orchestrate.driver import run
    from bat.orchestrate.executors import executor_kind

    cfg = shared_config(spec, seed)
    layout = RunLayout(shared_dir(spec, seed))
    record_path = ExperimentRunFiles(layout.root).shared_record
    wall = 0.0
    if not record_path.exists():
        install_secret(experiment_secret(spec), layout.heldout_secret)
        started = time.monotonic()
        code = run(cfg, layout, wait=executor_kind(cfg) == "slurm")
        wall = time.monotonic() - started
        missing = [p for p in ROUND0_PHASES if read_done(layout.phase_dir(0, p)) is None]
        if code != 0 or missing:
            raise SharedStateError(
                f"seed {seed}: shared bootstrap in {layout.root} ended with exit {code}; "
                f"phases not DONE: {missing or 'none'}"
            )
        built = SharedRecord(
            seed=seed, wall_s=round(wall, 3), sft_checkpoint=sft_checkpoint(layout), sft_digest=sft_digest(layout)
        )
        write_record(record_path, built)
    record = load_record(record_path, SharedRecord)
    return SharedInfo(
        seed=seed,
        layout=layout,
        sft_checkpoint=str(record.sft_checkpoint),
        sft_digest=record.sft_digest,
        wall_s=record.wall_s,
        compute_s=round0_compute_s(layout),
    )


def _link_tree(src: Path, dst: Path) -> None:
    """Hard-link every file of `src` under `dst` (copy when linking is impossible, e.g. across filesystems)."""

    def link(s: str, d: str) -> None:
        try:
            os.link(s, d)
        except OSError:
            shutil.copy2(s, d)

    shutil.copytree(src, dst, copy_function=link, symlinks=True)


def shared_paths(shared: RunLayout, target: RunLayout, *, models_only: bool = False) -> list[tuple[Path, Path]]:
    """(source, destination) pairs an arm takes from the shared bootstrap (`models_only`: the locally built base
    model alone); missing ones are skipped (a pretrained policy has no locally built model)."""
    if models_only:
        pairs = [(shared.models_dir, target.models_dir)]
    else:
        pairs = [
            (shared.bank_root, target.bank_root),
            (shared.models_dir, target.models_dir),
            (shared.sft_checkpoints, target.sft_checkpoints),
            (shared.fingerprint_index, target.fingerprint_index),
            (shared.heldout_runs(0, "controller"), target.heldout_runs(0, "controller")),
        ]
        pairs += [(shared.phase_dir(0, p), target.phase_dir(0, p)) for p in ROUND0_PHASES]
    return [(s, d) for s, d in pairs if s.exists()]


def seed_arm_state(shared: SharedInfo, root: Path, *, models_only: bool = False) -> RunLayout:
    """Create the arm state dir `root` from the shared bootstrap (no-op when already seeded); returns its layout.

    `models_only` (base arm): only the base model directory (when the bootstrap built one; a pretrained policy is
    read from the model cache), so its evaluation shares no held-out files.
    """
    root = Path(root)
    if ExperimentRunFiles(root).seed_marker.exists():
        return RunLayout(root)
    with atomic_dir(root) as tmp:
        target = RunLayout(tmp)
        pairs = shared_paths(shared.layout, target, models_only=models_only)
        for src, dst in pairs:
            dst.parent.mkdir(parents=True, exist_ok=True)
            _link_tree(src, dst)
        run_secret(shared.layout)  # a bootstrap evaluated without a held-out secret cannot seed arms
        install_secret(shared.layout.heldout_secret, target.heldout_secret)
        marker = SeedMarker(
            shared=str(shared.layout.root),
            seed=shared.seed,
            sft_digest=shared.sft_digest,
            models_only=models_only,
            copied=[str(d.relative_to(target.root)) for _, d in pairs],
        )
        write_record(ExperimentRunFiles(tmp).seed_marker, marker)  # both resolved
    return RunLayout(root)
