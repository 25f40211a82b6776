"""The suite anchor: the shared SFT checkpoint scored on this disk's held-out suite, so that arms evaluated on
different suites (pieces run on different disks, each with its own experiment secret) compare through it.

A suite's own difficulty moves every arm's score (the same SFT checkpoint: 16.2 on one suite, 9.3 on another, over
40 final runs each), so `bat.experiment.wide_summary.wide_summary` compares two arms on different suites by their gains over
the SFT on their own suites. The SFT checkpoint rebuilds bit-identically on every disk (its digest is checked), so
each disk can score it on its own suite: `widen_anchor` does so once per suite, on the same wide final split as the
arms' wide evaluations, unless a wide record of that checkpoint on that suite exists already (an arm that retained
the SFT itself).

Reads the shared bootstrap's state (SFT export, held-out secret) and the committed wide records. Writes the
evaluation's held-out files under the shared bootstrap's state dir (`heldout/round_00/final/wide_rNN/`, resuming
from its partial runs) and the committed record `<out_dir>/wide/_anchor/suite_<fingerprint>_r<NN>.json` (never
overwritten). The final split never feeds routing or tuning.
"""

from __future__ import annotations

import time
from pathlib import Path

from bat.experiment.records import write_record
from bat.experiment.share import sft_checkpoint, shared_dir
from bat.experiment.spec import ExperimentSpec
from bat.experiment.wide import read_anchor_pieces, read_wide_pieces, score_wide, scored_record, wide_config
from bat.state.experiment_layout import WIDE_ANCHOR_DIR_NAME, ResultsLayout


def anchored(out_dir: Path, digest: str, suite: str, repeats: int) -> bool:
    """True when a committed wide record (an arm's or an anchor) scored checkpoint `digest` on `suite` at
    `repeats` runs per track."""
    records = [*read_wide_pieces(out_dir), *read_anchor_pieces(out_dir)]
    return any((r.checkpoint_digest, r.heldout_suite, r.repeats) == (digest, suite, repeats) for r in records)


def widen_anchor(spec: ExperimentSpec, arm: str, seed: int, repeats: int, out_dir: Path) -> str | None:
    """Score the shared SFT checkpoint serving `seed` on `repeats` final runs per track of this disk's suite (under
    `arm`'s wide config: the arms differ in training, not in evaluation) and record it; None when the suite is
    anchored already, else the line to print."""
    from bat.benchmark.secret import read_secret
    from bat.evaluate.manifest import checkpoint_digest
    from bat.experiment.pieces import stamp_piece
    from bat.state.layout import RunLayout

    layout = RunLayout(shared_dir(spec, seed))
    checkpoint = sft_checkpoint(layout)
    digest, suite = checkpoint_digest(checkpoint), read_secret(layout.heldout_secret).fingerprint
    path = ResultsLayout(out_dir).wide_anchor_piece(suite, repeats)
    if path.exists() or anchored(out_dir, digest, suite, repeats):
        return None
    started = time.monotonic()
    agg, runs = score_wide(wide_config(spec, arm, seed, repeats), layout, 0, checkpoint, repeats)
    record = scored_record(WIDE_ANCHOR_DIR_NAME, seed, repeats, (digest, suite), agg, runs, started)
    write_record(path, stamp_piece(record))
    return f"suite {suite[:8]}: the shared SFT scored {100 * (agg.overall or 0):.1f} over {agg.n_runs} runs -> {path}"
