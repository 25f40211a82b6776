"""Record a finished unit of an arm-versus-twin study from its state folder as a small committed piece
(`TwinPiece`), so the analysis runs on any machine from committed numbers alone.

* `train` (an arm x seed): its `experiment_seed.json` (the SFT digest it started from), `round_01/grpo/DONE.json`
  and `metrics.jsonl` (`reward_mean`, the true reward, of every step 1..N) and its held-out probe scores
  `stage_probe/step_<N>.json` at each probed step (one probe digest; each scored the step's export, digest-checked
  while the export is on disk), the candidate's digest and, with LoRA, its adapter folder, copied beside the piece
  (`units/<arm>/seed_<s>_adapter/`, a few MB) so the candidate can be rebuilt from the SFT on another disk.
* `e2e` (an arm x seed): its `experiment_arm.json` (done, final round) and its end-of-run final evaluation
  (`heldout/round_NN/final/manifest.json` and `runs.jsonl`: finish, Overall and end reason per run id), of the
  step-N candidate.
* `reference` (the shared bootstrap): its `experiment_shared.json` (SFT digest), the SFT's final evaluation
  (`heldout/round_00/final/`, `bat experiment --sft-final`) and its probe score `stage_probe/step_0.json`.

An `e2e` (replayed) or `reference` unit whose final-split evaluation has not finished keeps its runs so far instead
(`keep_unfinished`, `bat.experiment.twin_partial`), so the evaluation resumes from them on another disk.

Held-out run records are read here, on the evaluation side, and reduced to numbers per run id (no instance content).
Writes `<twin_dir>/units/<arm>/seed_<s>_<part>.json` (`bat.state.twin_layout`), stamped with the commit, CPU and
time; a recorded piece is never overwritten (one identical to what the state holds now is left as it is).
"""

from __future__ import annotations

from pathlib import Path

from bat.experiment.records import load_record, read_record, write_record
from bat.experiment.share import arm_dir, shared_dir
from bat.experiment.spec import ExperimentSpec
from bat.experiment.twin_design import REFERENCE, TwinDesign
from bat.experiment.twin_errors import TwinUnitError
from bat.experiment.twin_partial import suite_fingerprint
from bat.schemas.experiment import ArmRecord, SeedMarker, SharedRecord
from bat.schemas.twin_study import E2eRun, TwinPiece
from bat.state.checkpoints import adapter_dir
from bat.state.digest import sha256_path
from bat.state.experiment_layout import ExperimentRunFiles
from bat.state.layout import RunLayout
from bat.state.model_files import export_weights
from bat.state.twin_layout import TwinStudyLayout, probe_label

STAMP_FIELDS = {"piece_schema", "commit", "cpu", "recorded_at"}
"""A piece's provenance: two recordings of the same unit differ there and nowhere else."""
GRPO_ROUND = 1


def step_rewards(path: Path, steps: int) -> list[float | None]:
    """`reward_mean` of steps 1..`steps` from a GRPO `metrics.jsonl` (the last line of a step wins: a resumed block
    rewrites it); TwinUnitError naming the steps missing."""
    from bat.state.jsonl import read_jsonl

    by_step = {int(r["step"]): r.get("reward_mean") for r in read_jsonl(path) if "reward_mean" in r}
    missing = [s for s in range(1, steps + 1) if s not in by_step]
    if missing:
        raise TwinUnitError(f"{path}: no reward_mean for steps {missing[:5]}{'...' if len(missing) > 5 else ''}")
    return [None if by_step[s] is None else float(by_step[s]) for s in range(1, steps + 1)]


def probe_scores(layout: RunLayout, checkpoints: dict[int, Path]) -> tuple[dict[int, list[float | None]], str, dict]:
    """(step -> state means, probe digest, step -> scored checkpoint digest) of the scores `step_<N>` for every
    step of `checkpoints` (step -> the checkpoint that score must have scored). TwinUnitError when one is missing
    (naming the command that scores it), scored other states than the others, or scored another checkpoint."""
    from bat.evaluate.manifest import checkpoint_digest
    from bat.schemas.stage_probe import StageProbeScore
    from bat.state.atomic import read_json

    probe, digests, scored = {}, {}, {}
    for step, checkpoint in sorted(checkpoints.items()):
        path = layout.stage_probe.score(probe_label(step))
        if not path.exists():
            raise TwinUnitError(
                f"{path}: no probe score at step {step}; score it first: bat evaluate probe --state {layout.root} "
                f"--checkpoint {checkpoint} --label {probe_label(step)}"
            )
        score = StageProbeScore.model_validate(read_json(path))
        if Path(checkpoint).is_dir() and checkpoint_digest(checkpoint) != score.checkpoint_digest:
            raise TwinUnitError(f"{path}: scored {score.checkpoint}, not the step-{step} checkpoint {checkpoint}")
        probe[step], digests[step], scored[step] = list(score.state_means), score.probe_digest, score.checkpoint_digest
    if len(set(digests.values())) > 1:
        raise TwinUnitError(f"{layout.stage_probe.scores_root}: the probe scores met different probe states: {digests}")
    return probe, next(iter(digests.values()), ""), scored


def final_runs(layout: RunLayout, round_index: int, expected: int) -> tuple[str, dict[str, E2eRun]]:
    """(checkpoint digest, run id -> outcome) of the final-split evaluation filed under `round_index`; TwinUnitError
    unless it finished with `expected` runs and kept them (`evaluate.keep_raw_runs`)."""
    from bat.evaluate.store import read_heldout_runs
    from bat.schemas.evaluation import EvalManifest
    from bat.state.atomic import read_json

    manifest_path = layout.heldout_manifest(round_index, "final")
    if not manifest_path.exists():
        raise TwinUnitError(f"{manifest_path}: no final-split evaluation here yet; run it first (it resumes)")
    manifest = EvalManifest.model_validate(read_json(manifest_path))
    runs = read_heldout_runs(layout, round_index, "final")
    ids = {e.run_id for e in manifest.runs}
    if len(ids) != expected or {r.run_id for r in runs} != ids:
        raise TwinUnitError(
            f"{manifest_path}: {len(ids)} runs in the manifest, {len(runs)} run records kept; the study needs all "
            f"{expected} (benchmark.split_repeats.final x tracks, with evaluate.keep_raw_runs on)"
        )
    outcomes = {
        r.run_id: E2eRun(finished=r.end_reason == "done", overall=r.overall, end_reason=r.end_reason)
        for r in sorted(runs, key=lambda r: r.run_id)
    }
    return manifest.checkpoint_digest, outcomes


def train_piece(spec: ExperimentSpec, design: TwinDesign, arm: str, seed: int) -> TwinPiece:
    """The `train` unit of `arm` x `seed` from its state dir."""
    from bat.evaluate.manifest import checkpoint_digest
    from bat.state.markers import read_done
    from bat.state.online_layout import OnlineLayout

    layout = RunLayout(arm_dir(spec, seed, arm))
    marker = read_record(ExperimentRunFiles(layout.root).seed_marker, SeedMarker)
    grpo = layout.phase_dir(GRPO_ROUND, "grpo")
    if marker is None or read_done(grpo) is None:
        raise TwinUnitError(
            f"{grpo}: arm {arm} seed {seed} has not finished its {design.steps} GRPO steps on this disk; "
            f"bat experiment --config FILE --only {arm} --seeds {seed} runs (or resumes) them"
        )
    online = OnlineLayout(grpo)
    candidate = layout.candidate_model(GRPO_ROUND)
    checkpoints = {s: online.export(s) for s in design.probe_steps if s < design.steps}
    checkpoints[design.steps] = candidate
    probe, probe_digest, scored = probe_scores(layout, checkpoints)
    adapter = adapter_dir(candidate)
    return TwinPiece(
        part="train",
        arm=arm,
        seed=seed,
        sft_digest=marker.sft_digest,
        heldout_suite=suite_fingerprint(layout),
        rewards=step_rewards(layout.training_metrics(GRPO_ROUND, "grpo"), design.steps),
        probe=probe,
        probe_digest=probe_digest,
        probe_checkpoints=scored,
        checkpoint_digest=checkpoint_digest(candidate) if candidate.is_dir() else "",
        weights_digest=sha256_path(export_weights(candidate)) or "",
        adapter_digest=sha256_path(adapter) if adapter.is_dir() else "",
    )


def keep_adapter(root: Path, spec: ExperimentSpec, piece: TwinPiece) -> Path | None:
    """Copy the LoRA adapter of a `train` piece's candidate (the arm x seed's state dir) beside the piece under the
    study folder `root` (`units/<arm>/seed_<s>_adapter/`), once; returns that folder, or None for a piece without
    one. TwinUnitError when a kept adapter there has another digest than the piece's."""
    import shutil

    if piece.part != "train" or not piece.adapter_digest:
        return None
    kept = TwinStudyLayout(root).adapter(piece.arm, piece.seed)
    if kept.is_dir():
        if sha256_path(kept) != piece.adapter_digest:
            raise TwinUnitError(
                f"{kept}: kept already with another digest than the candidate's adapter {piece.adapter_digest[:16]}; "
                "a kept unit is never overwritten: keep it, or move it aside (with the reason)"
            )
        return kept
    source = adapter_dir(RunLayout(arm_dir(spec, piece.seed, piece.arm)).candidate_model(GRPO_ROUND))
    partial = kept.with_name(kept.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(source, partial)
    if sha256_path(partial) != piece.adapter_digest:
        shutil.rmtree(partial)
        raise TwinUnitError(f"{source}: changed while it was copied (digest differs from the piece's); record again")
    partial.rename(kept)
    return kept


def e2e_piece(spec: ExperimentSpec, design: TwinDesign, arm: str, seed: int) -> TwinPiece:
    """The `e2e` unit of `arm` x `seed`: its end-of-run final evaluation, which must have scored the candidate."""
    from bat.evaluate.manifest import checkpoint_digest

    layout = RunLayout(arm_dir(spec, seed, arm))
    path = ExperimentRunFiles(layout.root).arm_record
    record = read_record(path, ArmRecord)
    if record is None or record.status != "done" or record.final_round is None:
        replayed = replayed_piece(spec, design, arm, seed)
        if replayed is not None:
            return replayed
        raise TwinUnitError(
            f"{path}: arm {arm} seed {seed} is {record.status if record else 'not run on this disk'}; its end-of-run "
            f"evaluation comes last in: bat experiment --config FILE --only {arm} --seeds {seed} (or, with its train "
            f"unit committed: bat experiment --config FILE --twin-replay --only {arm} --seeds {seed})"
        )
    digest, runs = final_runs(layout, record.final_round, design.final_split_runs)
    candidate = layout.candidate_model(GRPO_ROUND)
    if candidate.is_dir() and checkpoint_digest(candidate) != digest:
        raise TwinUnitError(
            f"{layout.heldout_manifest(record.final_round, 'final')}: the end-of-run evaluation scored another "
            f"checkpoint than the step-{design.steps} candidate {candidate} (curriculum.retain=last keeps it)"
        )
    return TwinPiece(
        part="e2e",
        arm=arm,
        seed=seed,
        sft_digest=record.shared_sft_digest or "",
        heldout_suite=suite_fingerprint(layout),
        checkpoint_digest=digest,
        e2e=runs,
    )


def replayed_piece(spec: ExperimentSpec, design: TwinDesign, arm: str, seed: int) -> TwinPiece | None:
    """The `e2e` unit of `arm` x `seed` from its replay run dir (`bat.experiment.twin_replay`: the candidate rebuilt
    from its committed train unit), or None when no replay has played its final split on this disk."""
    from bat.evaluate.manifest import checkpoint_digest
    from bat.experiment.twin_replay import REPLAY_ROUND, committed_train_piece, replay_layout

    layout = replay_layout(spec, arm, seed)
    if not layout.heldout_manifest(REPLAY_ROUND, "final").exists():
        return None
    trained = committed_train_piece(design, arm, seed)
    digest, runs = final_runs(layout, REPLAY_ROUND, design.final_split_runs)
    candidate = layout.candidate_model(REPLAY_ROUND)
    if not candidate.is_dir() or checkpoint_digest(candidate) != digest:
        raise TwinUnitError(
            f"{layout.heldout_manifest(REPLAY_ROUND, 'final')}: scored another checkpoint than {candidate}"
        )
    if sha256_path(export_weights(candidate)) != trained.weights_digest:
        raise TwinUnitError(
            f"{candidate}: its weights are not the trained candidate's ({trained.weights_digest[:16]}); the unit "
            "would score another checkpoint than the one trained"
        )
    return TwinPiece(
        part="e2e",
        arm=arm,
        seed=seed,
        sft_digest=trained.sft_digest,
        heldout_suite=suite_fingerprint(layout),
        checkpoint_digest=digest,
        weights_digest=trained.weights_digest,
        e2e=runs,
    )


def reference_piece(spec: ExperimentSpec, design: TwinDesign, seed: int) -> TwinPiece:
    """The `reference` unit of the shared bootstrap built with `seed`: the SFT's final runs and its probe at 0."""
    layout = RunLayout(shared_dir(spec, seed))
    path = ExperimentRunFiles(layout.root).shared_record
    shared = read_record(path, SharedRecord)
    if shared is None:
        raise TwinUnitError(
            f"{path}: the shared bootstrap is not built on this disk; bat experiment --sft-final builds it"
        )
    digest, runs = final_runs(layout, 0, design.final_split_runs)
    if digest != shared.sft_digest:
        raise TwinUnitError(
            f"{layout.heldout_manifest(0, 'final')}: scored {digest[:16]}, not the SFT {shared.sft_digest[:16]}"
        )
    export = Path(shared.sft_checkpoint) if shared.sft_checkpoint else layout.candidate_model(0)
    probe, probe_digest, scored = probe_scores(layout, {0: export})
    return TwinPiece(
        part="reference",
        arm=REFERENCE,
        seed=seed,
        sft_digest=shared.sft_digest,
        heldout_suite=suite_fingerprint(layout),
        probe=probe,
        probe_digest=probe_digest,
        probe_checkpoints=scored,
        checkpoint_digest=digest,
        e2e=runs,
    )


def keep_unfinished(spec: ExperimentSpec, design: TwinDesign, part: str, arm: str, seed: int) -> str | None:
    """Keep the runs played so far by the unfinished final-split evaluation of an `e2e` unit's replay or of the
    `reference` unit's SFT (`bat.experiment.twin_partial`); returns the line to print, None when none is unfinished
    on this disk (a `train` unit, or an arm's own end-of-run evaluation, keeps nothing)."""
    from bat.experiment.twin_partial import keep_partial_runs
    from bat.experiment.twin_replay import REPLAY_ROUND, replay_layout

    if part == "e2e":
        layout = replay_layout(spec, arm, seed)
        checkpoint, round_index = layout.candidate_model(REPLAY_ROUND), REPLAY_ROUND
    elif part == "reference":
        layout = RunLayout(shared_dir(spec, seed))
        shared = read_record(ExperimentRunFiles(layout.root).shared_record, SharedRecord)
        if shared is None:
            return None
        checkpoint, round_index = Path(shared.sft_checkpoint or layout.candidate_model(0)), 0
    else:
        return None
    if not checkpoint.is_dir():
        return None
    return keep_partial_runs(design.root, arm, seed, part, layout, round_index, checkpoint)


def _keep_or_problem(
    spec: ExperimentSpec, design: TwinDesign, part: str, arm: str, seed: int, problem: TwinUnitError
) -> tuple[str | None, TwinUnitError]:
    """(the line of the runs kept from an unfinished evaluation, or None; the problem to report otherwise)."""
    try:
        return keep_unfinished(spec, design, part, arm, seed), problem
    except TwinUnitError as refused:
        return None, refused


def _content(piece: TwinPiece) -> dict:
    return piece.model_dump(mode="json", exclude=STAMP_FIELDS)


def record_piece(root: Path, piece: TwinPiece) -> tuple[Path, bool]:
    """Write `piece` under the study folder `root` once, stamped; returns (path, whether it was written now).
    TwinUnitError when a recorded piece there differs from it (a recorded unit is never overwritten)."""
    from bat.experiment.pieces import stamp_piece

    path = TwinStudyLayout(root).piece(piece.arm, piece.seed, piece.part)
    if path.exists():
        old, new = _content(load_record(path, TwinPiece)), _content(piece)
        if old == new:
            return path, False
        fields = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
        raise TwinUnitError(
            f"{path}: recorded already, and the state dir now holds other numbers ({', '.join(fields)} differ); a "
            "recorded unit is never overwritten: keep it, or move it aside (with the reason) to record this one"
        )
    return write_record(path, stamp_piece(piece)), True


def record_units(
    spec: ExperimentSpec, design: TwinDesign, part: str, arms: list[str], seeds: list[int]
) -> tuple[list[str], list[str]]:
    """Record the `part` unit of every selected arm x seed (`reference`: of every bootstrap of the study); returns
    (one line per unit recorded or found recorded, one line per unit that could not be and why)."""
    if part == "reference":
        targets = [(REFERENCE, b) for b in design.reference_seeds]
    else:
        targets = [(a, s) for a in arms for s in seeds]
    lines, errors = [], []
    for arm, seed in targets:
        try:
            if part == "train":
                piece = train_piece(spec, design, arm, seed)
            elif part == "e2e":
                piece = e2e_piece(spec, design, arm, seed)
            else:
                piece = reference_piece(spec, design, seed)
            path, written = record_piece(design.root, piece)
            keep_adapter(design.root, spec, piece)
        except TwinUnitError as exc:
            kept, problem = _keep_or_problem(spec, design, part, arm, seed, exc)
            (lines if kept else errors).append(kept or f"{arm} seed {seed} ({part}): {problem}")
            continue
        lines.append(f"{arm} seed {seed} ({part}): {'recorded' if written else 'recorded already, identical'} {path}")
    return lines, errors
