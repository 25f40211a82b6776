"""File names of an experiment tree (`bat experiment`): `<experiment>/HELDOUT_SECRET`, the shared bootstrap record,
each seed's marker and each arm's record. The folders themselves (`seed_N/`, arms) are built by `bat.experiment`
from these names and the experiment spec."""

from __future__ import annotations

from pathlib import Path

HELDOUT_SECRET_NAME = "HELDOUT_SECRET"
"""The experiment's held-out secret at its root: every run it makes is evaluated on the suite it keys."""
SHARED_RECORD_NAME = "experiment_shared.json"
"""The shared bootstrap's record (bank, SFT checkpoint and digest, wall and compute seconds) in its run folder."""
SEED_MARKER_NAME = "experiment_seed.json"
"""Marker of an arm run seeded from the shared bootstrap."""
ARM_RECORD_NAME = "experiment_arm.json"
"""An arm x seed's record, written when that arm run ends."""
ATTEMPT_NAME = "experiment_attempt.json"
"""An arm x seed's open attempt (its start, epoch seconds), in the arm state dir while the attempt runs; one left
behind marks an attempt stopped before it could write its record."""


def experiment_secret(root: Path) -> Path:
    """`<experiment root>/HELDOUT_SECRET`."""
    return Path(root) / HELDOUT_SECRET_NAME


PIECES_DIR_NAME = "runs"
"""Folder under an experiment's results dir (`out_dir`) holding the committed record of every finished piece."""
SHARED_PIECE_DIR_NAME = "_shared"
"""Sub-folder of `runs/` holding one record per shared bootstrap (not a valid arm name)."""


def arm_piece(out_dir: Path, arm: str, seed: int) -> Path:
    """`<out_dir>/runs/<arm>/seed_<seed>.json`: the committed result of one finished arm x seed."""
    return Path(out_dir) / PIECES_DIR_NAME / arm / f"seed_{seed}.json"


def shared_piece(out_dir: Path, seed: int) -> Path:
    """`<out_dir>/runs/_shared/seed_<seed>.json`: the committed record of the shared bootstrap built with `seed`."""
    return Path(out_dir) / PIECES_DIR_NAME / SHARED_PIECE_DIR_NAME / f"seed_{seed}.json"


SUPERSEDED_DIR_NAME = "superseded"
"""Folder under an experiment's results dir holding the records of arm x seeds rerun under a later change; kept and
listed, never merged into the results."""
SUPERSEDED_STATE_DIR_NAME = "_superseded"
"""Folder under a seed's state dir where a superseded arm run's state dir is moved (not a valid arm name)."""


def superseded_piece(out_dir: Path, tag: str, arm: str, seed: int) -> Path:
    """`<out_dir>/superseded/<tag>/<arm>/seed_<seed>.json`: the record of an arm x seed superseded under `tag`."""
    return Path(out_dir) / SUPERSEDED_DIR_NAME / tag / arm / f"seed_{seed}.json"


def superseded_state(seed_dir: Path, tag: str, arm: str) -> Path:
    """`<seed state dir>/_superseded/<tag>/<arm>`: where a superseded arm run's state dir is kept."""
    return Path(seed_dir) / SUPERSEDED_STATE_DIR_NAME / tag / arm


WIDE_DIR_NAME = "wide"
"""Folder under an experiment's results dir holding the committed wide final evaluations (`bat.experiment.wide`)."""


def wide_piece(out_dir: Path, arm: str, seed: int, repeats: int) -> Path:
    """`<out_dir>/wide/<arm>/seed_<seed>_r<NN>.json`: the committed record of one wide final evaluation."""
    return Path(out_dir) / WIDE_DIR_NAME / arm / f"seed_{seed}_r{repeats:02d}.json"


WIDE_ANCHOR_DIR_NAME = "_anchor"
"""Folder under `<out_dir>/wide/` of the suite anchors (never an arm's name: arms cannot start with `_`)."""


def wide_anchor_piece(out_dir: Path, suite: str, repeats: int) -> Path:
    """`<out_dir>/wide/_anchor/suite_<fingerprint>_r<NN>.json`: the shared SFT checkpoint's wide final evaluation on
    one held-out suite (named by its secret's public fingerprint)."""
    return Path(out_dir) / WIDE_DIR_NAME / WIDE_ANCHOR_DIR_NAME / f"suite_{suite}_r{repeats:02d}.json"


NULL_PREFIX = "_null"
"""Name prefix of the null control (`bat.experiment.null_control`): one arm per KL it was calibrated to."""


def null_arm(kl: float) -> str:
    """`_null-kl<KL>` (`_null-kl0.03`): the null control at KL `kl` from the SFT, both its state folder under the
    experiment's state dir and its arm name and folder under `<out_dir>/wide/` (never an arm's name: arms cannot
    start with `_`)."""
    return f"{NULL_PREFIX}-kl{kl:g}"


def is_null_arm(name: str) -> bool:
    """True for a null control's arm name (`null_arm`)."""
    return name.startswith(NULL_PREFIX + "-kl")
