"""The experiment loop: per seed, the shared bootstrap, then every selected arm; then collect and write results.

Reads the experiment spec. Writes the state dirs under `<state_dir>/<name>/` and the results under `out_dir`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bat.experiment.collect import collect
from bat.experiment.execute import run_arm
from bat.experiment.share import run_shared
from bat.experiment.spec import ExperimentError, ExperimentSpec
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
    """Run the selected arms x seeds (finished ones are skipped), then write results for the whole experiment.

    `allow_config_change` lets an arm run resume under a changed resolved config (see `bat.config.run_record`).
    """
    arms, chosen = select(spec, only, seeds)
    failures: dict[str, str] = {}
    if not collect_only:
        for seed in chosen:
            try:
                shared = run_shared(spec, seed)
            except Exception as exc:  # reported in results; the other seeds still run
                failures[str(seed)] = f"{type(exc).__name__}: {exc}"
                print(f"bat experiment: seed {seed} shared bootstrap FAILED: {failures[str(seed)]}", flush=True)
                continue
            for arm in arms:
                run_arm(spec, arm, seed, shared, allow_config_change=allow_config_change)
    results = stamp({**collect(spec), "shared_failures": failures}, command)
    write_results(spec, results, out_dir)
    return results
