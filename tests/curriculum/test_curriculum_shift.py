"""Domain-shift detector: tracks collapsing while the track mean holds; changed track sets."""

from curriculum_helpers import build_agg

from bat.curriculum.decide import snapshot
from bat.curriculum.shift import detect_domain_shift


def _snap(r, tracks):
    return snapshot(build_agg(r, sum(tracks.values()) / len(tracks), tracks=tracks))


def test_shift_detected_when_a_track_collapses_but_the_mean_holds():
    prev = _snap(0, {"classification": 0.5, "detection": 0.5, "segmentation": 0.5})
    cur = _snap(1, {"classification": 0.7, "detection": 0.35, "segmentation": 0.6})
    shift = detect_domain_shift(prev, cur, 0.10)
    assert shift.detected and shift.shifted_tracks == ["detection"]
    assert abs(shift.track_deltas["detection"] + 0.15) < 1e-9


def test_no_shift_for_uniform_moves_or_first_round():
    prev = _snap(0, {"classification": 0.5, "detection": 0.5, "segmentation": 0.5})
    down = _snap(
        1, {"classification": 0.35, "detection": 0.38, "segmentation": 0.36}
    )  # everything fell: a drop, not a shift
    assert not detect_domain_shift(prev, down, 0.10).detected
    up = _snap(1, {"classification": 0.55, "detection": 0.52, "segmentation": 0.56})
    assert not detect_domain_shift(prev, up, 0.10).detected
    assert not detect_domain_shift(None, up, 0.10).detected


def test_changed_track_set_is_a_shift():
    prev = _snap(0, {"classification": 0.5, "detection": 0.5})
    cur = _snap(1, {"classification": 0.5, "vqa": 0.5})
    assert "track set changed" in detect_domain_shift(prev, cur, 0.10).reason
