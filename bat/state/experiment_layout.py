"""Paths of an arm experiment (`bat experiment`).

`ExperimentStateLayout`: the state tree `<state_dir>/<name>/` (the held-out secret, `seed_N/<arm or _shared>/`
run dirs, null-control run dirs, superseded state dirs). `ExperimentRunFiles`: the experiment's own files inside
one run dir (arm record, open attempt, seed marker, shared bootstrap record, null-control calibration).
`ResultsLayout`: the results dir (`out_dir`: results.json, README.md, plots, committed pieces under `runs/`,
`superseded/` and `wide/`). The module-level functions are the same paths for callers holding a bare folder.
"""

from __future__ import annotations

from dataclasses import dataclass
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
REPLAY_DIR_NAME = "_replay"
"""Folder under a seed's state dir holding the run dirs of arms' candidates rebuilt from committed train units."""


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


SHARED_STATE_DIR_NAME = "_shared"
"""A seed's shared bootstrap run dir (`seed_<s>/_shared`; reserved: not a valid arm name)."""
WIDE_VARIANT_PREFIX = "wide_r"
"""Held-out variant of a wide final evaluation (`wide_rNN`): its runs and aggregate are filed under it."""


def wide_variant(repeats: int) -> str:
    """Variant name of a wide evaluation with `repeats` runs per track (`wide_r15`)."""
    return f"{WIDE_VARIANT_PREFIX}{repeats:02d}"


SEED_DIR_PREFIX = "seed_"
"""A seed's folder under the experiment's state dir (`seed_<s>`) and a piece's name under an arm (`seed_<s>.json`)."""
RESULTS_NAME = "results.json"
"""The collected results in the results dir."""
RESULTS_PAGE = "README.md"
"""The readable report in the results dir (a name any repository page has, so not a state-only name)."""
CURVES_NAME = "curves.png"
"""The controller curves figure in the results dir."""
STAGES_FIGURE = "stages.png"
"""The per-stage staircase figure in the results dir (a run report draws one of the same name)."""
NULL_WORK_DIR_NAME = "null"
"""Folder under a null seed's `checkpoints/` holding every scale tried."""
NULL_CALIBRATION_NAME = "null.json"
"""The null seed's calibration record in its work folder: every scale tried and the KL it measured."""


@dataclass(frozen=True)
class ExperimentStateLayout:
    """The state tree of one experiment: `<state_dir>/<name>/`."""

    root: Path

    @property
    def secret(self) -> Path:
        """`<root>/HELDOUT_SECRET`: the experiment's one held-out secret."""
        return experiment_secret(self.root)

    def seed_dir(self, seed: int) -> Path:
        """`<root>/seed_<seed>`: every run dir of one seed."""
        return Path(self.root) / f"{SEED_DIR_PREFIX}{seed}"

    def run_dir(self, seed: int, name: str) -> Path:
        """`<root>/seed_<seed>/<name>`: an arm's run dir (or the shared bootstrap's, `_shared`)."""
        return self.seed_dir(seed) / name

    def replay_dir(self, seed: int, arm: str) -> Path:
        """`<root>/seed_<seed>/_replay/<arm>`: the run dir where an arm's candidate, rebuilt from its committed
        train unit on another disk, plays its end-of-run runs."""
        return self.seed_dir(seed) / REPLAY_DIR_NAME / arm

    def superseded_state(self, seed: int, tag: str, arm: str) -> Path:
        """`<root>/seed_<seed>/_superseded/<tag>/<arm>`: where a superseded arm run's state dir is kept."""
        return superseded_state(self.seed_dir(seed), tag, arm)

    def null_dir(self, kl: float, null_seed: int) -> Path:
        """`<root>/_null-kl<KL>/seed_<k>`: the run dir of one null seed at one KL."""
        return Path(self.root) / null_arm(kl) / f"{SEED_DIR_PREFIX}{null_seed}"


@dataclass(frozen=True)
class ExperimentRunFiles:
    """The experiment's files inside one run dir (an arm x seed's, the shared bootstrap's or a null seed's)."""

    root: Path

    @property
    def arm_record(self) -> Path:
        """`experiment_arm.json`: the arm x seed's record, written when its run ends."""
        return Path(self.root) / ARM_RECORD_NAME

    @property
    def attempt(self) -> Path:
        """`experiment_attempt.json`: the open attempt."""
        return Path(self.root) / ATTEMPT_NAME

    @property
    def seed_marker(self) -> Path:
        """`experiment_seed.json`: the run dir was seeded from the shared bootstrap."""
        return Path(self.root) / SEED_MARKER_NAME

    @property
    def shared_record(self) -> Path:
        """`experiment_shared.json`: the shared bootstrap's record."""
        return Path(self.root) / SHARED_RECORD_NAME

    @property
    def null_work(self) -> Path:
        """`checkpoints/null/`: a null seed's calibration folder (every scale tried, the chosen one kept)."""
        from bat.state.layout import RunLayout

        return RunLayout(Path(self.root)).checkpoints_dir / NULL_WORK_DIR_NAME

    @property
    def null_calibration(self) -> Path:
        """`checkpoints/null/null.json`: the null seed's calibration record."""
        return self.null_work / NULL_CALIBRATION_NAME

    def null_scale(self, scale: float) -> Path:
        """`checkpoints/null/scale_<s>`: the export moved by relative scale `scale`."""
        return self.null_work / f"scale_{scale:.6g}"


@dataclass(frozen=True)
class ResultsLayout:
    """An experiment's results dir (`out_dir`): report files and every committed piece."""

    root: Path

    @property
    def results(self) -> Path:
        return Path(self.root) / RESULTS_NAME

    @property
    def report(self) -> Path:
        return Path(self.root) / RESULTS_PAGE

    @property
    def curves(self) -> Path:
        return Path(self.root) / CURVES_NAME

    @property
    def stages(self) -> Path:
        return Path(self.root) / STAGES_FIGURE

    @property
    def pieces_dir(self) -> Path:
        """`runs/`: the committed record of every finished piece."""
        return Path(self.root) / PIECES_DIR_NAME

    def arm_piece(self, arm: str, seed: int) -> Path:
        return arm_piece(self.root, arm, seed)

    def shared_piece(self, seed: int) -> Path:
        return shared_piece(self.root, seed)

    def superseded_piece(self, tag: str, arm: str, seed: int) -> Path:
        return superseded_piece(self.root, tag, arm, seed)

    def superseded_shared(self, tag: str, seed: int) -> Path:
        """`superseded/<tag>/_shared/seed_<seed>.json`: a retired bootstrap record."""
        return superseded_piece(self.root, tag, SHARED_PIECE_DIR_NAME, seed)

    def wide_piece(self, arm: str, seed: int, repeats: int) -> Path:
        return wide_piece(self.root, arm, seed, repeats)

    def wide_anchor_piece(self, suite: str, repeats: int) -> Path:
        return wide_anchor_piece(self.root, suite, repeats)

    def committed_seeds(self) -> dict[str, list[int]]:
        """Arm name -> seeds with a committed record under `runs/` (the bootstraps' folder left out)."""
        out: dict[str, list[int]] = {}
        if not self.pieces_dir.is_dir():
            return out
        for folder in sorted(p for p in self.pieces_dir.iterdir() if p.is_dir() and p.name != SHARED_PIECE_DIR_NAME):
            seeds = sorted(_seed_of(p) for p in folder.glob(f"{SEED_DIR_PREFIX}*.json") if _seed_of(p) >= 0)
            if seeds:
                out[folder.name] = seeds
        return out

    def arm_pieces(self, arm: str) -> list[Path]:
        """Every committed record of `arm` under `runs/<arm>/`, sorted."""
        return sorted((self.pieces_dir / arm).glob(f"{SEED_DIR_PREFIX}*.json"))

    def superseded_pieces(self) -> list[Path]:
        """Every superseded arm x seed record (`superseded/<tag>/<arm>/seed_<s>.json`; retired bootstraps left out),
        ordered by tag, arm and seed."""
        root = Path(self.root) / SUPERSEDED_DIR_NAME
        paths = sorted(root.glob(f"*/*/{SEED_DIR_PREFIX}*.json")) if root.is_dir() else []
        return [p for p in paths if p.parent.name != SHARED_PIECE_DIR_NAME]

    def wide_pieces(self) -> list[Path]:
        """Every committed wide record `wide/<arm>/seed_<s>_rNN.json` (anchors and null controls included where
        named so: anchors are `suite_*` files and are not matched)."""
        folder = Path(self.root) / WIDE_DIR_NAME
        return sorted(folder.glob(f"*/{SEED_DIR_PREFIX}*_r*.json")) if folder.is_dir() else []

    def anchor_pieces(self) -> list[Path]:
        """Every committed suite anchor `wide/_anchor/suite_<fp>_rNN.json`."""
        folder = Path(self.root) / WIDE_DIR_NAME / WIDE_ANCHOR_DIR_NAME
        return sorted(folder.glob("suite_*_r*.json")) if folder.is_dir() else []


def _seed_of(piece: Path) -> int:
    """The seed of a piece named `seed_<s>.json`; -1 for any other name."""
    tail = piece.stem[len(SEED_DIR_PREFIX) :]
    return int(tail) if piece.stem.startswith(SEED_DIR_PREFIX) and tail.isdigit() else -1
