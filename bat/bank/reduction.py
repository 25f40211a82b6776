"""E2E reduction R_lambda (Eq. 12): versioned, task-specific grids of lambda = (cases, input fraction, validate passes).

A grid is immutable once released: change it by adding a new version key, never by editing one.
"""

from __future__ import annotations

import random

from bat.schemas.bank import Reduction

# version -> track (or "*" default) -> candidate (cases, input_fraction, validate_passes).
# v1 keeps inputs whole (input_fraction 1.0): the built-in benchmark's cases are already tiny fixed-size arrays
# whose hidden truth is tied to the full array, and it needs >= 2 cases (one may be the corrupt case).
GRIDS: dict[str, dict[str, tuple[tuple[int, float, int], ...]]] = {
    "v1": {
        "*": ((2, 1.0, 2), (3, 1.0, 2), (2, 1.0, 1), (4, 1.0, 2)),
        "segmentation": ((2, 1.0, 2), (3, 1.0, 2), (2, 1.0, 1)),
        "synthesis": ((2, 1.0, 2), (3, 1.0, 2), (2, 1.0, 1)),
        "vqa": ((3, 1.0, 2), (4, 1.0, 2), (2, 1.0, 2)),
        "report": ((2, 1.0, 2), (3, 1.0, 2), (4, 1.0, 1)),
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
