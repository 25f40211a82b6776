"""E2E reduction grid: versioned, deterministic, capped at the task's case count."""

import pytest

from bat.bank.reduction import GRIDS, choose_reduction, grid_for


def test_choice_is_deterministic_and_from_grid():
    a = choose_reduction("v1", "segmentation", 5, seed=7)
    b = choose_reduction("v1", "segmentation", 5, seed=7)
    assert a == b
    assert (a.cases, a.input_fraction, a.validate_passes) in GRIDS["v1"]["segmentation"]
    assert a.grid_version == "v1"


def test_cases_capped_at_task_size():
    for seed in range(20):
        assert choose_reduction("v1", "classification", 2, seed).cases == 2
        assert 2 <= choose_reduction("v1", "vqa", 6, seed).cases <= 6


def test_unknown_grid_lists_valid_versions():
    with pytest.raises(ValueError, match=r"valid versions: \['v1'\]"):
        grid_for("v9", "vqa")
    with pytest.raises(ValueError, match="at least 2 cases"):
        choose_reduction("v1", "vqa", 1, 1)


def test_unknown_track_uses_default_grid():
    assert grid_for("v1", "newtrack") == GRIDS["v1"]["*"]
