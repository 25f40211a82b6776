import pytest
from pydantic import ValidationError

from bat.config.benchmark import ALL_TRACKS, BenchmarkConfig
from bat.config.root import BatConfig


def test_defaults_match_the_paper_suite():
    cfg = BatConfig().benchmark
    assert cfg.tracks == ALL_TRACKS and len(cfg.tracks) == 7 and cfg.repeats == 10 and cfg.kind == "builtin"
    assert cfg.heldout_seed != cfg.practice_seed


@pytest.mark.parametrize(
    "data,message",
    [
        ({"heldout_seed": 5, "practice_seed": 5}, "must differ"),
        ({"tracks": ["xray"]}, "classification"),
        ({"tracks": ["vqa", "vqa"]}, "unique"),
        ({"kind": "external"}, "external.command"),
        ({"repeats": 0}, "greater than or equal"),
        ({"surprise": 1}, "Extra inputs"),
    ],
)
def test_bad_values_are_refused_with_what_is_valid(data, message):
    with pytest.raises(ValidationError, match=message):
        BenchmarkConfig.model_validate(data)
