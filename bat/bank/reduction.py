"""E2E reduction R_lambda (Eq. 12): versioned, task-specific grids of lambda = (cases, input fraction, validate passes).

A grid is immutable once released: change it by adding a new version key, never by editing one.
"""

from __future__ import annotations

import random

from bat.schemas.bank import Reduction

# version -> track (or "*" default) -> candidate (cases, input_fraction, validate_passes)
GRIDS: dict[str, dict[str, tuple[tuple[int, float, int], ...]]] = {
    "v1": {
        "*": ((2, 1.0, 2), (2, 0.5, 2), (3, 0.5, 2), (1, 1.0, 1)),
        "segmentation": ((1, 0.5, 2), (2, 0.5, 2), (2, 0.25, 1)),
        "synthesis": ((1, 0.5, 2), (2, 0.5, 2), (2, 0.25, 1)),
        "vqa": ((2, 1.0, 2), (3, 1.0, 2), (1, 1.0, 1)),
        "report": ((2, 1.0, 2), (3, 1.0, 2), (2, 0.5, 1)),
    },
}


def grid_for(version: str, track: str) -> tuple[tuple[int, float, int], ...]:
    """The candidate lambdas of `track` in grid `version`; unknown versions raise listing the valid ones."""
    if version not in GRIDS:
        raise ValueError(f"unknown reduction grid {version!r}; valid versions: {sorted(GRIDS)}")
    grid = GRIDS[version]
    return grid.get(track.lower(), grid["*"])


def choose_reduction(version: str, track: str, n_cases: int, seed: int) -> Reduction:
    """Pick lambda for a task with `n_cases` cases deterministically from `seed`; cases capped at n_cases."""
    if n_cases < 1:
        raise ValueError(f"a task needs at least one case to reduce, got n_cases={n_cases}")
    candidates = grid_for(version, track)
    cases, fraction, passes = candidates[random.Random(seed).randrange(len(candidates))]
    return Reduction(grid_version=version, cases=min(cases, n_cases), input_fraction=fraction, validate_passes=passes)
