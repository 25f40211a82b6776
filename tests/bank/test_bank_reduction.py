"""E2E reduction grid (Eq. 12): versioned, deterministic, capped at the task's case count; v2 caps inputs too."""

import pytest

from bat.bank.practice import instance_for
from bat.benchmark import TRACKS
from bat.benchmark.reduction import GRIDS, choose_reduction, grid_for
from bat.benchmark.tracks import get_track
from bat.config import load_config
from bat.schemas.bank import PracticeTask, Reduction


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
    with pytest.raises(ValueError, match=r"valid versions: \['v1', 'v2'\]"):
        grid_for("v9", "vqa")
    with pytest.raises(ValueError, match="at least 2 cases"):
        choose_reduction("v1", "vqa", 1, 1)


def test_unknown_track_uses_default_grid():
    assert grid_for("v1", "newtrack") == GRIDS["v1"]["*"]


def test_v2_reduces_inputs_for_every_track_and_v1_never_does():
    """lambda_input of Eq. 12: grid v2 has candidates below 1 on every track (and one at full size); v1 stays whole."""
    for track in TRACKS:
        fractions = {c[1] for c in grid_for("v2", track)}
        assert 1.0 in fractions and min(fractions) < 1.0, track
        assert {c[1] for c in grid_for("v1", track)} == {1.0}


@pytest.mark.parametrize("version", sorted(GRIDS))
def test_every_grid_candidate_is_one_its_track_can_make(version):
    for track in TRACKS:
        for cases, fraction, passes in grid_for(version, track):
            assert get_track(track).fraction_problem(fraction) is None, (version, track, fraction)
            assert cases >= 2 and passes >= 1


def _reduced_task(track: str, fraction: float) -> PracticeTask:
    reduction = Reduction(grid_version="v2", cases=2, input_fraction=fraction, validate_passes=2)
    return PracticeTask(task_id=f"t-{track}", track=track, seed=11, variant="expert", reduction=reduction)


def test_instance_for_applies_the_input_fraction():
    """R_lambda (Eq. 12) builds the reduced instance instead of refusing lambda_input < 1."""
    config = load_config(None, ["benchmark.runtime=inprocess"])
    full, half = (
        instance_for(_reduced_task("detection", 1.0), config),
        instance_for(_reduced_task("detection", 0.5), config),
    )
    assert half.input_fraction == 0.5 and full.input_fraction == 1.0
    assert len(half.case_ids) == len(full.case_ids) == 2
    assert all(len(half.files[p]) < len(full.files[p]) for p in full.files if p.startswith("data/"))


def test_instance_for_refuses_a_fraction_the_track_cannot_make():
    config = load_config(None, ["benchmark.runtime=inprocess"])
    with pytest.raises(ValueError, match=r"task t-synthesis: .*valid: 0\.45 <= input_fraction <= 1\.0"):
        instance_for(_reduced_task("synthesis", 0.25), config)
