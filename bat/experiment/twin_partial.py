"""An unfinished E2E unit's held-out runs, kept between disks: a unit of 200 held-out runs takes longer than a
machine is held, so the runs it played so far are committed beside the study's pieces and its evaluation resumes
from them on the next disk instead of from nothing.

* `keep_partial_runs` reads the unfinished final-split evaluation of a replayed candidate (`e2e`, the replay run dir
  of `bat.experiment.twin_replay`) or of the shared SFT (`reference`, the bootstrap's state dir): its
  `heldout/round_NN/final/partial.jsonl` (complete lines only: a player may be appending), the played checkpoint's
  weights and the held-out suite's fingerprint. Writes `<study>/units/<arm>/seed_<s>_<part>_partial.json`
  (`TwinPartialRuns`, stamped): the runs kept before, and every run played since; a kept run is never replaced.
* `restore_partial_runs` (called before the evaluation plays) appends the kept runs this disk has not played to its
  `partial.jsonl`, each with its held-out instance id filled in from the suite, so `bat.evaluate.runner.play_runs`
  resumes after them. Refused (`TwinPartialError`) when the kept runs met other weights or another suite.

Held-out run records are read and written on the evaluation side only; the kept file holds no instance ids and no
transcripts (a resumed evaluation's failure breakdown covers the runs whose transcripts are on its disk).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bat.experiment.records import read_record, write_record
from bat.experiment.twin_errors import TwinUnitError
from bat.schemas.evaluation import EvalRun
from bat.schemas.twin_study import TwinPartialRuns
from bat.state.digest import sha256_path
from bat.state.layout import RunLayout
from bat.state.model_files import export_weights
from bat.state.twin_layout import TwinStudyLayout

FINAL = "final"


class TwinPartialError(TwinUnitError):
    """Kept runs that cannot be resumed from or merged (another checkpoint or suite); the message names the file."""


def played_weights(checkpoint: Path) -> str:
    """sha256 of the weights file of the checkpoint an evaluation plays."""
    return sha256_path(export_weights(checkpoint)) or ""


def suite_fingerprint(layout: RunLayout) -> str:
    """Public fingerprint of the run dir's held-out secret ("" when it has none)."""
    from bat.benchmark.secret import read_secret

    return read_secret(layout.heldout_secret).fingerprint if layout.heldout_secret.exists() else ""


def _check_same(kept: TwinPartialRuns, path: Path, weights: str, suite: str) -> None:
    if kept.weights_digest != weights:
        raise TwinPartialError(
            f"{path}: its runs played weights {kept.weights_digest[:16]}, this checkpoint's are {weights[:16]}; "
            "they belong to another checkpoint: move the file aside (with the reason) to start this one afresh"
        )
    if kept.heldout_suite != suite:
        raise TwinPartialError(
            f"{path}: its runs met held-out suite {kept.heldout_suite[:16]}, this run dir's is {suite[:16]}; "
            "every unit of the study meets one suite (the committed secret_file)"
        )


def keep_partial_runs(
    study_root: Path, arm: str, seed: int, part: str, layout: RunLayout, round_index: int, checkpoint: Path
) -> str | None:
    """Merge the runs `layout`'s unfinished final-split evaluation of `round_index` has played into the study's
    kept runs of `arm` x `seed`'s `part`; returns the line to print, or None when there is no unfinished evaluation
    here. TwinPartialError when the kept runs met other weights or another suite."""
    from bat.experiment.pieces import stamp_piece
    from bat.state.jsonl import read_jsonl

    partial = layout.heldout_partial(round_index, FINAL)
    played = read_jsonl(partial, EvalRun, skip_torn_tail=True) if partial.exists() else []
    if not played:
        return None
    path = TwinStudyLayout(study_root).partial_runs(arm, seed, part)
    weights, suite = played_weights(checkpoint), suite_fingerprint(layout)
    kept = read_record(path, TwinPartialRuns)
    if kept is not None:
        _check_same(kept, path, weights, suite)
    merged = {r.run_id: r for r in (kept.runs if kept else [])}
    new = {r.run_id: r.model_copy(update={"instance_id": ""}) for r in played if r.run_id not in merged}
    if not new:
        return f"{arm} seed {seed} ({part}): {len(merged)} runs kept already in {path}, none played since"
    merged.update(new)
    record = TwinPartialRuns(
        part=part,
        arm=arm,
        seed=seed,
        weights_digest=weights,
        heldout_suite=suite,
        runs=[merged[k] for k in sorted(merged)],
    )
    write_record(path, stamp_piece(record))
    return (
        f"{arm} seed {seed} ({part}): not finished; kept {len(merged)} played runs ({len(new)} new) in {path}: "
        "commit it, and the evaluation resumes from them on any disk"
    )


def restore_partial_runs(
    study_root: Path, arm: str, seed: int, part: str, cfg: Any, layout: RunLayout, round_index: int, weights: str
) -> int:
    """Append the study's kept runs of `arm` x `seed`'s `part` that `layout`'s final-split evaluation of
    `round_index` (of a checkpoint whose weights file has sha256 `weights`, `played_weights`) has not played to its
    `partial.jsonl` (instance ids from the suite); returns how many. 0 without kept runs. TwinPartialError when
    they met other weights or another suite, or name runs the suite lacks."""
    from bat.evaluate.runner import suite_runs
    from bat.state.jsonl import append_jsonl, read_jsonl_resuming

    path = TwinStudyLayout(study_root).partial_runs(arm, seed, part)
    kept = read_record(path, TwinPartialRuns)
    if kept is None:
        return 0
    _check_same(kept, path, weights, suite_fingerprint(layout))
    suite = {r.run_id: r for r in suite_runs(cfg, layout, FINAL)}
    strangers = [r.run_id for r in kept.runs if r.run_id not in suite or suite[r.run_id].sampling_seed != r.seed]
    if strangers:
        raise TwinPartialError(
            f"{path}: runs {strangers[:3]} are not runs of this final split (benchmark.split_repeats.final and tracks "
            "must be the experiment's)"
        )
    partial = layout.heldout_partial(round_index, FINAL)
    played = {r.run_id for r in read_jsonl_resuming(partial, EvalRun)[0]} if partial.exists() else set()
    missing = [
        r.model_copy(update={"instance_id": suite[r.run_id].task.task_id}) for r in kept.runs if r.run_id not in played
    ]
    if missing:
        append_jsonl(partial, missing)
    return len(missing)
