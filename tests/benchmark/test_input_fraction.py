"""The size knob of practice instances: lambda_input of the E2E reduction R_lambda (Eq. 12 of the paper).

A practice instance at input fraction f < 1 generates every case with at most f of the full input's elements, its
output contract names the reduced shape, the scripted expert still solves it and the real grader scores it; f = 1.0
is the full-size instance byte for byte; held-out instances never take the knob.
"""

import io
import json

import numpy as np
import pytest

from bat.benchmark import TRACKS, generate_instance, practice_instance, practice_seed
from bat.benchmark.episode import run_instance
from bat.benchmark.tracks import get_track

SEEDS = (0, 1, 2)


def _inputs(inst) -> dict[str, np.ndarray]:
    """The instance's input arrays (data/*.npy), NaNs of a corrupt case included."""
    return {
        path: np.load(io.BytesIO(data), allow_pickle=False)
        for path, data in inst.files.items()
        if path.startswith("data/") and path.endswith(".npy")
    }


def _instance(track, index, config, fraction):
    return practice_instance(track, practice_seed(track, index, config), config, input_fraction=fraction)


@pytest.mark.parametrize("track", TRACKS)
def test_half_fraction_makes_every_input_smaller_and_the_contract_follows(track, fast_config):
    """Eq. 12: each input is capped at lambda_input of its source size; the output contract names the reduced shape."""
    for index in SEEDS:
        full, half = _instance(track, index, fast_config, 1.0), _instance(track, index, fast_config, 0.5)
        assert half.instance_id == full.instance_id and len(half.case_ids) == len(full.case_ids)
        full_sizes = {a.size for a in _inputs(full).values()}
        half_arrays = _inputs(half)
        assert full_sizes == {_full_elements(track)} and len(half_arrays) == len(_inputs(full))
        assert all(0 < array.size <= 0.5 * _full_elements(track) for array in half_arrays.values())
        shape = next(iter(half_arrays.values())).shape
        contract = json.loads(half.files["task/spec.json"])["output"]
        if "shape" in contract:
            expected = [2 * n for n in shape] if track == "synthesis" else list(shape)
            assert contract["shape"] == expected
            assert all(t.shape == tuple(expected) for t in half.truths.values())
        if "image_shape" in contract:
            assert contract["image_shape"] == list(shape)
        assert half.meta()["input_fraction"] == 0.5 and "input_fraction" not in full.meta()


def _full_elements(track: str) -> int:
    shape = get_track(track).case_shape(1.0)
    return int(np.prod([n // 2 for n in shape] if track == "synthesis" else shape))


@pytest.mark.parametrize("track", TRACKS)
def test_expert_solves_reduced_instances_as_at_full_size(track, fast_config, tmp_path):
    """The reduced task keeps its semantics (Eq. 12): the scripted expert scores Overall near 1 at 0.5 and at the
    track's smallest fraction, as at full size, and the real grader finds every stage item satisfied."""
    track_obj = get_track(track)
    for index in SEEDS[:2]:
        full = run_instance(_instance(track, index, fast_config, 1.0), "expert", tmp_path / f"f{index}", fast_config)
        for fraction in (0.5, track_obj.min_input_fraction):
            inst = _instance(track, index, fast_config, fraction)
            ep = run_instance(inst, "expert", tmp_path / f"{fraction}-{index}", fast_config)
            score = ep.score
            assert score.valid and not score.breach, (fraction, score.null_reasons)
            assert all(v is not False for items in score.items.values() for v in items.values()), score.items
            assert score.overall >= 0.95 and score.overall >= full.score.overall - 0.03, (fraction, score.overall)
            assert score.task >= 0.9, (fraction, score.task_metrics)


@pytest.mark.parametrize("track", TRACKS)
def test_fraction_one_is_byte_identical_to_no_knob(track, fast_config):
    """lambda_input = 1.0 leaves the instance (workspace files, truths, grader metadata) exactly as it was."""
    for space, seed in (("practice", practice_seed(track, 4, fast_config)), ("heldout", 2**100 + 7)):
        plain = generate_instance(track, space, seed, config=fast_config.benchmark)
        knob = generate_instance(track, space, seed, config=fast_config.benchmark, input_fraction=1.0)
        assert plain.files == knob.files
        assert plain.meta() == knob.meta()
        assert plain.truths.keys() == knob.truths.keys()
        for case, truth in plain.truths.items():
            assert np.array_equal(np.asarray(truth), np.asarray(knob.truths[case]))


def test_heldout_space_refuses_the_knob(fast_config):
    """Held-out instances stay full size: only practice tasks are reduced (Eq. 12)."""
    with pytest.raises(ValueError, match=r"practice space only.*valid there: 1\.0"):
        generate_instance("classification", "heldout", 5, config=fast_config.benchmark, input_fraction=0.5)


@pytest.mark.parametrize("fraction", [0.2, 0.0, 1.5])
def test_fraction_outside_the_track_range_lists_the_valid_range(fraction, fast_config):
    with pytest.raises(ValueError, match=r"valid: 0\.25 <= input_fraction <= 1\.0"):
        practice_instance("vqa", 3, fast_config, input_fraction=fraction)
