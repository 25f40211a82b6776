"""The experiment loop: per seed, the shared bootstrap, then every selected arm; then collect and write results.

Reads the experiment spec. Writes the state dirs under `<state_dir>/<name>/`, the results under `out_dir`, and there
under `runs/` the record of each finished arm x seed and shared bootstrap (`bat.experiment.pieces`), to be committed
so that a later piece of the experiment, on a fresh disk, merges them.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bat.experiment.collect import collect, seed_result
from bat.experiment.execute import run_arm
from bat.experiment.pieces import committed_arms, digest_check, write_arm_piece, write_shared_piece
from bat.experiment.share import run_shared
from bat.experiment.spec import ExperimentError, ExperimentSpec, bootstrap_seed_of
from bat.experiment.write import stamp, write_results


def select(spec: ExperimentSpec, only: Iterable[str] | None, seeds: Iterable[int] | None) -> tuple[list, list[int]]:
    """The arms and seeds to run; unknown names/seeds raise ExperimentError listing the valid ones."""
    arms = [spec.arm(n) for n in only] if only else list(spec.arms)
    chosen = list(seeds) if seeds else list(spec.seeds)
    unknown = sorted(set(chosen) - set(spec.seeds))
    if unknown:
        raise ExperimentError(f"seeds {unknown} are not in the experiment; seeds: {list(spec.seeds)}")
    return arms, chosen


def run_experiment(
    spec: ExperimentSpec,
    *,
    only: Iterable[str] | None = None,
    seeds: Iterable[int] | None = None,
    command: str = "",
    out_dir: Path | None = None,
    collect_only: bool = False,
    allow_config_change: bool = False,
) -> dict[str, Any]:
    """Run the selected arms x seeds, then write results for the whole experiment. Finished ones are skipped: those
    finished in their state dir, and those with a committed piece under `<out>/runs/` (a seed whose selected arms are
    all committed does not rebuild its bootstrap).

    `allow_config_change` lets an arm run resume under a changed resolved config (see `bat.config.run_record`).
    """
    arms, chosen = select(spec, only, seeds)
    out = Path(out_dir or spec.out_dir)
    failures: dict[str, str] = {}
    warnings: list[str] = []
    if not collect_only:
        committed = committed_arms(out)
        for seed in chosen:
            pending = []
            for arm in arms:
                if seed in committed.get(arm.name, []):
                    print(
                        f"bat experiment: arm {arm.name} seed {seed} is committed under {out}/runs/: skipped",
                        flush=True,
                    )
                else:
                    pending.append(arm)
            if not pending:  # nothing left to run for this seed: its bootstrap is not rebuilt
                continue
            try:
                shared = run_shared(spec, seed)
            except Exception as exc:  # reported in results; the other seeds still run
                failures[str(seed)] = f"{type(exc).__name__}: {exc}"
                print(f"bat experiment: seed {seed} shared bootstrap FAILED: {failures[str(seed)]}", flush=True)
                continue
            boot = bootstrap_seed_of(spec, seed)
            mismatch = digest_check(out, boot, shared.sft_digest)
            if mismatch and mismatch not in warnings:
                warnings.append(mismatch)
                print(f"bat experiment: WARNING: {mismatch}", flush=True)
            write_shared_piece(out, boot, {"sft_digest": shared.sft_digest, "wall_s": shared.wall_s})
            for arm in pending:
                record = run_arm(spec, arm, seed, shared, allow_config_change=allow_config_change)
                if record.get("status") == "done" and write_arm_piece(
                    out, arm.name, seed, seed_result(spec, arm.name, seed)
                ):
                    print(
                        f"bat experiment: arm {arm.name} seed {seed} recorded under {out}/runs/ (commit it)", flush=True
                    )
    results = stamp({**collect(spec, out), "shared_failures": failures, "bootstrap_warnings": warnings}, command)
    write_results(spec, results, out_dir)
    return results
