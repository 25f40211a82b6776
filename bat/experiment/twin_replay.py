"""An arm x seed's end-of-run E2E runs on another disk than the one that trained it: its step-N candidate rebuilt
from committed files (the rebuilt shared SFT with the train unit's kept LoRA adapter merged in) and played on the
final split, the same runs every arm x seed and the SFT meet.

Reads the study's committed `train` piece (`units/<arm>/seed_<s>_train.json`: SFT, weights and adapter digests)
and its kept adapter (`units/<arm>/seed_<s>_adapter/`); builds (or resumes) the shared bootstrap. Writes the replay
run dir `<experiment>/seed_<s>/_replay/<arm>/` (`bat.state.experiment_layout`): the candidate export at
`checkpoints/round_01/export` and the final split's runs under `heldout/round_01/final/`, which
`bat experiment --twin-unit e2e` then records when the arm's own run is not on this disk. Runs kept from an
unfinished replay on another disk (`units/<arm>/seed_<s>_e2e_partial.json`, `bat.experiment.twin_partial`) are
restored before it plays, so it resumes after them.
"""

from __future__ import annotations

from pathlib import Path

from bat.experiment.records import read_record
from bat.experiment.spec import ExperimentSpec, arm_config
from bat.experiment.twin_design import TwinDesign
from bat.experiment.twin_errors import TwinReplayError
from bat.schemas.twin_study import TwinPiece
from bat.state.digest import sha256_path
from bat.state.experiment_layout import ExperimentStateLayout
from bat.state.layout import RunLayout
from bat.state.twin_layout import TwinStudyLayout

REPLAY_ROUND = 1
"""The round whose candidate a twin study's arm trains (its one online GRPO round)."""


def replay_layout(spec: ExperimentSpec, arm: str, seed: int) -> RunLayout:
    """The replay run dir of `arm` x `seed` (it may not exist yet)."""
    return RunLayout(ExperimentStateLayout(spec.root).replay_dir(seed, arm))


def committed_train_piece(design: TwinDesign, arm: str, seed: int) -> TwinPiece:
    """The committed `train` piece of `arm` x `seed` with its kept adapter checked against the piece's digest."""
    study = TwinStudyLayout(design.root)
    path = study.piece(arm, seed, "train")
    piece = read_record(path, TwinPiece)
    if piece is None:
        raise TwinReplayError(f"{path}: no train unit of {arm} seed {seed} is committed; train it first")
    kept = study.adapter(arm, seed)
    if not piece.adapter_digest or not piece.weights_digest:
        raise TwinReplayError(f"{path}: the unit kept no LoRA adapter (grpo.lora off): its candidate cannot be rebuilt")
    if sha256_path(kept) != piece.adapter_digest:
        raise TwinReplayError(f"{kept}: missing or not the adapter the train unit recorded; restore it from git")
    return piece


def replay_candidate(spec: ExperimentSpec, design: TwinDesign, arm: str, seed: int) -> str:
    """Rebuild `arm` x `seed`'s candidate and play (or resume) its final-split runs in its replay run dir; returns
    the line to print. TwinReplayError when the rebuilt candidate's weights are not the trained ones (the SFT rebuilt
    otherwise, or the merge computed otherwise, on another CPU kind): a unit scores the checkpoint it trained."""
    from bat.evaluate.store import load_aggregate
    from bat.experiment.share import run_shared, seed_arm_state
    from bat.experiment.twin_partial import played_weights, restore_partial_runs
    from bat.experiment.wide import WIDE_PHASE, play_final
    from bat.train.lora import write_merged_export

    piece = committed_train_piece(design, arm, seed)
    shared = run_shared(spec, seed)
    layout = seed_arm_state(shared, replay_layout(spec, arm, seed).root, models_only=True)
    cfg = arm_config(spec, arm, seed)
    candidate = layout.candidate_model(REPLAY_ROUND)
    meta = {"kind": "twin-replay", "arm": arm, "seed": seed, "start": shared.sft_checkpoint}
    kept = TwinStudyLayout(design.root).adapter(arm, seed)
    write_merged_export(Path(shared.sft_checkpoint), kept, candidate, dtype=cfg.model.dtype, meta=meta)
    weights = played_weights(candidate)
    if weights != piece.weights_digest:
        sft = "the same SFT" if shared.sft_digest == piece.sft_digest else f"SFT {shared.sft_digest[:16]}"
        machine = piece.cpu.model if piece.cpu else "an unrecorded CPU"
        raise TwinReplayError(
            f"{candidate}: rebuilt from {sft} with weights {weights[:16]}, not the trained candidate's "
            f"{piece.weights_digest[:16]} (trained from SFT {piece.sft_digest[:16]} on {machine}); not played. "
            "Play it on the CPU kind that trained it"
        )
    restored = 0
    if load_aggregate(layout, REPLAY_ROUND, "final", WIDE_PHASE) is None:
        restored = restore_partial_runs(design.root, arm, seed, "e2e", cfg, layout, REPLAY_ROUND, weights)
        play_final(cfg, layout, REPLAY_ROUND, str(candidate), None)
    agg = load_aggregate(layout, REPLAY_ROUND, "final", WIDE_PHASE)
    assert agg is not None
    resumed = f" ({restored} of them kept from another disk)" if restored else ""
    return (
        f"{arm} seed {seed}: the rebuilt candidate (the trained weights, bit for bit) played {agg.n_runs} final runs"
        f"{resumed} "
        f"-> {layout.heldout_runs(REPLAY_ROUND, 'final')}; record them: --twin-unit e2e --only {arm} --seeds {seed}"
    )
