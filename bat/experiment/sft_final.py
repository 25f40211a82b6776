"""The shared SFT checkpoint on an experiment's end-of-run final split: the same held-out runs every arm x seed's
end-of-run evaluation meets (`benchmark.split_repeats.final` per track; run ids and sampling seeds come from the
suite, keyed by split, track and repeat, never by the arm or the run seed), so the SFT is a baseline scored on
those runs rather than one draw of its own.

Reads (or builds and resumes, through `bat.experiment.share.run_shared`) the shared bootstrap serving a seed,
records it once under `<out>/runs/_shared/` and checks its SFT digest against the committed one (as `bat experiment`
does before training arms). Then plays the SFT export on the final split under the arms' evaluation config, with
`bat.experiment.wide.play_final` (one job of the end-of-run evaluation's kind, resuming from its partial runs, and
in a twin study first from the runs kept from another disk, `bat.experiment.twin_partial`).
Writes under the bootstrap's state dir: `heldout/round_00/final/` (manifest, runs, transcripts) and
`round_00/final_test/aggregate_final.json`. The final split never feeds routing or tuning.
"""

from __future__ import annotations

from pathlib import Path

from bat.experiment.pieces import digest_check, write_shared_piece
from bat.experiment.share import run_shared
from bat.experiment.spec import ExperimentError, ExperimentSpec, arm_config, bootstrap_seed_of
from bat.experiment.wide import WIDE_PHASE, play_final


class SftFinalError(ValueError):
    """The SFT cannot be scored as asked (its rebuilt bootstrap differs from the committed one)."""


def score_sft_final(spec: ExperimentSpec, seed: int, out_dir: Path, *, allow_bootstrap_change: bool = False) -> str:
    """Score the shared SFT serving `seed` on the final split (played unless finished already); returns the line
    to print. SftFinalError when the bootstrap rebuilt with another SFT digest than the committed one, unless
    `allow_bootstrap_change`; ExperimentError when the experiment has no trained arm (whose evaluation to share)."""
    from bat.evaluate.aggregate import pct
    from bat.evaluate.store import load_aggregate

    trained = [a for a in spec.arms if a.kind == "trained"]
    if not trained:
        raise ExperimentError(f"experiment {spec.name!r} has no trained arm: there is no shared SFT to score")
    boot = bootstrap_seed_of(spec, seed)
    shared = run_shared(spec, seed)
    mismatch = digest_check(out_dir, boot, shared.sft_digest)
    if mismatch and not allow_bootstrap_change:
        raise SftFinalError(f"{mismatch} Not scored; --allow-bootstrap-change scores it anyway.")
    write_shared_piece(out_dir, boot, shared.sft_digest, shared.wall_s)
    layout, restored = shared.layout, 0
    if load_aggregate(layout, 0, "final", WIDE_PHASE) is None:
        cfg = arm_config(spec, trained[0], boot)
        if spec.twin_dir is not None:
            from bat.experiment.twin_design import REFERENCE
            from bat.experiment.twin_partial import played_weights, restore_partial_runs

            weights = played_weights(Path(shared.sft_checkpoint))
            restored = restore_partial_runs(spec.twin_dir, REFERENCE, boot, "reference", cfg, layout, 0, weights)
        play_final(cfg, layout, 0, shared.sft_checkpoint, None)
    agg = load_aggregate(layout, 0, "final", WIDE_PHASE)
    assert agg is not None
    resumed = f" ({restored} of them kept from another disk)" if restored else ""
    return (
        f"the shared SFT (bootstrap seed {boot}) on the final split: Overall {pct(agg.overall)} over {agg.n_runs} "
        f"runs{resumed} -> {layout.heldout_runs(0, 'final')}"
    )
