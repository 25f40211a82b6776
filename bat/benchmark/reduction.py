"""E2E reduction R_lambda (Eq. 12): versioned, task-specific grids of lambda = (cases, input fraction, validate passes).

A grid is immutable once released: change it by adding a new version key, never by editing one.

lambda_input is a fraction of an input's size in elements: the built-in benchmark generates each case with every axis
scaled by input_fraction ** (1 / ndim) (floored), so a reduced input holds at most that fraction of the full one's
elements (`bat.benchmark.tracks.base.Track.case_shape`). Each track has a smallest fraction it can still make
solvable cases at (`Track.min_input_fraction`); a grid candidate below it is refused when its task is built.
"""

from __future__ import annotations

import random

from bat.schemas.bank import Reduction

# version -> track (or "*" default) -> candidate (cases, input_fraction, validate_passes).
# v1 keeps inputs whole (input_fraction 1.0): it predates the benchmark's size knob. Every candidate needs >= 2 cases
# (one may be the corrupt case).
# v2 (Eq. 12 with lambda_input < 1): each track keeps one full-size candidate and adds reduced ones. The fractions
# are at or above every track's `min_input_fraction` ("*" covers classification 0.0625, detection 0.0625,
# enhancement 0.25): 0.5 roughly halves each input (e.g. a 16x16 image -> 11x11, an 8x10x12 volume -> 6x7x9), 0.25
# quarters it (16x16 -> 8x8). Synthesis stays at 0.5 (its 4x5x6 input becomes 3x3x4; below 0.45 the
# low-resolution input loses the phantom). With the scripted expert, practice instances at these fractions scored
# the same Overall as at full size (>= 0.98 mean on every track, measured over 8 seeds each).
GRIDS: dict[str, dict[str, tuple[tuple[int, float, int], ...]]] = {
    "v1": {
        "*": ((2, 1.0, 2), (3, 1.0, 2), (2, 1.0, 1), (4, 1.0, 2)),
        "segmentation": ((2, 1.0, 2), (3, 1.0, 2), (2, 1.0, 1)),
        "synthesis": ((2, 1.0, 2), (3, 1.0, 2), (2, 1.0, 1)),
        "vqa": ((3, 1.0, 2), (4, 1.0, 2), (2, 1.0, 2)),
        "report": ((2, 1.0, 2), (3, 1.0, 2), (4, 1.0, 1)),
    },
    "v2": {
        "*": ((2, 1.0, 2), (3, 0.5, 2), (2, 0.5, 1), (4, 0.25, 2)),
        "segmentation": ((2, 1.0, 2), (3, 0.5, 2), (2, 0.25, 1)),
        "synthesis": ((2, 1.0, 2), (3, 0.5, 2), (2, 0.5, 1)),
        "vqa": ((3, 1.0, 2), (4, 0.5, 2), (2, 0.25, 2)),
        "report": ((2, 1.0, 2), (3, 0.5, 2), (4, 0.25, 1)),
    },
}
MIN_CASES = 2
"""The built-in benchmark needs at least two cases per instance."""


def grid_for(version: str, track: str) -> tuple[tuple[int, float, int], ...]:
    """The candidate lambdas of `track` in grid `version`; unknown versions raise listing the valid ones."""
    if version not in GRIDS:
        raise ValueError(f"unknown reduction grid {version!r}; valid versions: {sorted(GRIDS)}")
    grid = GRIDS[version]
    return grid.get(track.lower(), grid["*"])


def choose_reduction(version: str, track: str, n_cases: int, seed: int) -> Reduction:
    """Pick lambda for a task with `n_cases` cases deterministically from `seed`; cases capped at n_cases."""
    if n_cases < MIN_CASES:
        raise ValueError(f"a task needs at least {MIN_CASES} cases to reduce, got n_cases={n_cases}")
    candidates = grid_for(version, track)
    cases, fraction, passes = candidates[random.Random(seed).randrange(len(candidates))]
    return Reduction(
        grid_version=version, cases=max(MIN_CASES, min(cases, n_cases)), input_fraction=fraction, validate_passes=passes
    )
