"""The experiment loop: per seed, the shared bootstrap, then every selected arm; then collect and write results.

Reads the experiment spec. Writes the state dirs under `<state_dir>/<name>/`, the results under `out_dir`, and there
under `runs/` the record of each finished arm x seed and shared bootstrap (`bat.experiment.pieces`), to be committed
so that a later piece of the experiment, on a fresh disk, merges them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from bat.experiment.collect import collect, seed_result
from bat.experiment.execute import run_arm
from bat.experiment.pieces import (
    SupersedeError,
    committed_arms,
    digest_check,
    retire_shared_piece,
    supersede_arm_piece,
    write_arm_piece,
    write_shared_piece,
)
from bat.experiment.share import arm_dir, run_shared, seed_dir
from bat.experiment.spec import ExperimentError, ExperimentSpec, bootstrap_seed_of
from bat.experiment.write import stamp, write_results
from bat.schemas.experiment_results import ExperimentResults
from bat.state.experiment_layout import superseded_state

TAG_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
"""A supersede tag: lower-case letters, digits, `.`, `_`, `-` (a folder name), at most 64 characters."""


def select(spec: ExperimentSpec, only: Iterable[str] | None, seeds: Iterable[int] | None) -> tuple[list, list[int]]:
    """The arms and seeds to run; unknown names/seeds raise ExperimentError listing the valid ones."""
    arms = [spec.arm(n) for n in only] if only else list(spec.arms)
    chosen = list(seeds) if seeds else list(spec.seeds)
    unknown = sorted(set(chosen) - set(spec.seeds))
    if unknown:
        raise ExperimentError(f"seeds {unknown} are not in the experiment; seeds: {list(spec.seeds)}")
    return arms, chosen


def supersede(spec: ExperimentSpec, arms: list, seeds: list[int], tag: str, reason: str, out: Path) -> list[str]:
    """Set the selected arm x seeds aside so that they run again: each committed record moves to
    `<out>/superseded/<tag>/` (`supersede_arm_piece`) and each state dir to `<seed dir>/_superseded/<tag>/<arm>`.
    Checks every pair before moving anything; raises SupersedeError (naming what is valid) when the tag is malformed,
    a pair has neither a record nor a state dir, or the tag holds one already. Returns one line per move."""
    if not TAG_PATTERN.match(tag):
        raise SupersedeError(f"supersede tag {tag!r}: use lower-case letters, digits, '.', '_' or '-' (<= 64)")
    if not reason.strip():
        raise SupersedeError("superseding needs a reason (what changed, why the runs are redone)")
    moves: list[tuple[str, int, bool, Path | None]] = []
    committed = committed_arms(out)
    for seed in seeds:
        for arm in arms:
            state = arm_dir(spec, seed, arm.name)
            target = superseded_state(seed_dir(spec, seed), tag, arm.name)
            has_record = seed in committed.get(arm.name, [])
            if not has_record and not state.exists():
                raise SupersedeError(
                    f"arm {arm.name} seed {seed}: nothing to supersede (no committed record under {out}/runs/, no "
                    f"state dir {state}); committed: {committed or 'none'}"
                )
            if state.exists() and target.exists():
                raise SupersedeError(f"{target} exists: arm {arm.name} seed {seed} was superseded under {tag!r}")
            moves.append((arm.name, seed, has_record, state if state.exists() else None))
    lines = []
    for name, seed, has_record, state in moves:
        if has_record:
            lines.append(f"record -> {supersede_arm_piece(out, name, seed, tag, reason)}")
        if state is not None:
            target = superseded_state(seed_dir(spec, seed), tag, name)
            target.parent.mkdir(parents=True, exist_ok=True)
            state.rename(target)
            lines.append(f"state {state} -> {target}")
    trained = [a.name for a in spec.arms if a.kind == "trained"]
    for boot in sorted({bootstrap_seed_of(spec, seed) for seed in seeds}):
        retired = retire_shared_piece(out, boot, tag, trained)
        if retired is not None:
            lines.append(f"bootstrap record (no committed trained arm left on it) -> {retired}")
    return lines


def widen_now(spec: ExperimentSpec, arm: str, seed: int, out: Path) -> list[str]:
    """Widen a just-finished arm x seed to `spec.wide_final_repeats` final runs per track (`bat.experiment.wide`;
    records under `<out>/wide/`), and score the shared SFT on this disk's held-out suite once
    (`bat.experiment.anchor`); returns one line per evaluation that could not be done and why."""
    from bat.experiment.anchor import widen_anchor
    from bat.experiment.wide import print_wide, run_wide

    assert spec.wide_final_repeats is not None
    lines, skipped = run_wide(spec, [arm], [seed], spec.wide_final_repeats, out)
    try:  # this disk's suite gets the shared SFT's score once, so arms on other suites compare through it
        anchor = widen_anchor(spec, arm, bootstrap_seed_of(spec, seed), spec.wide_final_repeats, out)
        lines += [anchor] if anchor else []
    except Exception as exc:  # reported like a skipped widening; the arm's own record stands
        skipped.append(f"suite anchor (the shared SFT on this disk's suite): {type(exc).__name__}: {exc}")
    print_wide(lines, skipped)
    return skipped


def _pending(arms: list, seed: int, committed: dict[str, list[int]], out: Path) -> list:
    """The `arms` still to run for `seed`: those without a committed record under `<out>/runs/` (each skipped one is
    named)."""
    pending = []
    for arm in arms:
        if seed in committed.get(arm.name, []):
            print(f"bat experiment: arm {arm.name} seed {seed} is committed under {out}/runs/: skipped", flush=True)
        else:
            pending.append(arm)
    return pending


def _run_arms(spec: ExperimentSpec, arms: list, seed: int, shared, out: Path, allow_config_change: bool) -> list[str]:
    """Run each of `arms` x `seed` from the `shared` bootstrap; record each finished one under `<out>/runs/` and, with
    `spec.wide_final_repeats`, widen it at once. Returns the wide evaluations that could not be done."""
    wide_skipped: list[str] = []
    for arm in arms:
        record = run_arm(spec, arm, seed, shared, allow_config_change=allow_config_change)
        if record.status == "done" and write_arm_piece(out, arm.name, seed, seed_result(spec, arm.name, seed)):
            print(f"bat experiment: arm {arm.name} seed {seed} recorded under {out}/runs/ (commit it)", flush=True)
        if record.status == "done" and spec.wide_final_repeats is not None:
            wide_skipped += widen_now(spec, arm.name, seed, out)
    return wide_skipped


def run_experiment(
    spec: ExperimentSpec,
    *,
    only: Iterable[str] | None = None,
    seeds: Iterable[int] | None = None,
    command: str = "",
    out_dir: Path | None = None,
    collect_only: bool = False,
    allow_config_change: bool = False,
    supersede_as: tuple[str, str] | None = None,
    allow_bootstrap_change: bool = False,
) -> ExperimentResults:
    """Run the selected arms x seeds, then write results for the whole experiment. Finished ones are skipped: those
    finished in their state dir, and those with a committed piece under `<out>/runs/` (a seed whose selected arms are
    all committed does not rebuild its bootstrap).

    `allow_config_change` lets an arm run resume under a changed resolved config (see `bat.config.run_record`).
    A seed whose rebuilt bootstrap has another SFT digest than the committed one trains none of its arms (they would
    not be comparable with the committed ones; the seed is reported in `shared_failures`) unless
    `allow_bootstrap_change`, which trains them and keeps the warning.
    `supersede_as` = (tag, reason) first sets the selected arm x seeds aside (`supersede`), so they run afresh.
    With `spec.wide_final_repeats`, each arm x seed run here to completion is widened at once (`widen_now`); the
    returned results then carry `wide_skipped` for those that could not be.
    """
    arms, chosen = select(spec, only, seeds)
    out = Path(out_dir or spec.out_dir)
    if supersede_as is not None and not collect_only:
        for line in supersede(spec, arms, chosen, *supersede_as, out):
            print(f"bat experiment: superseded {line}", flush=True)
    failures: dict[str, str] = {}
    warnings: list[str] = []
    wide_skipped: list[str] = []
    if not collect_only:
        committed = committed_arms(out)
        for seed in chosen:
            pending = _pending(arms, seed, committed, out)
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
            if mismatch and not allow_bootstrap_change:
                failures[str(seed)] = f"{mismatch} Not trained; --allow-bootstrap-change trains them anyway."
                print(f"bat experiment: seed {seed}: {failures[str(seed)]}", flush=True)
                continue
            if mismatch and mismatch not in warnings:
                warnings.append(mismatch)
                print(f"bat experiment: WARNING: {mismatch}", flush=True)
            write_shared_piece(out, boot, shared.sft_digest, shared.wall_s)
            wide_skipped += _run_arms(spec, pending, seed, shared, out, allow_config_change)
    collected = collect(spec, out).model_copy(update={"shared_failures": failures, "bootstrap_warnings": warnings})
    results = stamp(collected, command)
    write_results(spec, results, out_dir)
    return results.model_copy(update={"wide_skipped": wide_skipped}) if wide_skipped else results
