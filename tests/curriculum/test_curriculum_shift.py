"""Domain-shift detector: tracks collapsing while the track mean holds; changed track sets."""

from types import SimpleNamespace

from curriculum_helpers import STAGES, build_agg

from bat.config.curriculum import CurriculumConfig
from bat.curriculum.arms import resolve_arm
from bat.curriculum.decide import History, decide, snapshot
from bat.curriculum.plan import focus_on_shifted_tracks
from bat.curriculum.shift import detect_domain_shift
from bat.schemas.routing import DomainShift


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


def test_focus_narrows_each_pool_to_the_shifted_tracks_where_they_suffice():
    """The `focus` response: a pool keeps only the shifted tracks' rows when they cover a round's draws (mixture
    count x batches_per_round); a pool where they do not keeps every track's rows; `report` changes nothing."""
    index = SimpleNamespace(by_track={"classification": ["c1", "c2", "c3"], "detection": ["d1", "d2", "d3"]})
    pools = {"S-target": ["c1", "c2", "d1", "d2"], "S-mix": ["c3", "d3"], "E2E": ["c1", "d1"]}
    shift = DomainShift(detected=True, reason="detection dropped", shifted_tracks=["detection"])
    decision = SimpleNamespace(domain_shift=shift, mixture={"S-target": 1, "S-mix": 1, "E2E": 1})
    out, focused = focus_on_shifted_tracks(pools, decision, CurriculumConfig(batches_per_round=2), index)
    assert out == {"S-target": ["d1", "d2"], "S-mix": ["c3", "d3"], "E2E": ["c1", "d1"]}  # 1 detection row < 2 draws
    assert focused == {"S-target": ["detection"]}
    report = CurriculumConfig(batches_per_round=2, shift_response="report")
    assert focus_on_shifted_tracks(pools, decision, report, index) == (pools, {})


def test_the_shift_decision_names_the_bank_refresh_only_when_a_steered_one_runs():
    cfg = CurriculumConfig()
    prev = build_agg(0, 0.5)
    cur = build_agg(1, 0.57, tracks={"classification": 0.3, "detection": 0.7, "segmentation": 0.7})
    history = History(previous_overall=0.5, previous=snapshot(prev))
    _, best = decide(
        round_index=0, arm=resolve_arm(cfg), cfg=cfg, stage_keys=STAGES, candidate=prev, best=None, history=History()
    )
    responses = [
        decide(
            round_index=1, arm=resolve_arm(cfg), cfg=cfg, stage_keys=STAGES, candidate=cur, best=best,
            history=history, refresh_steered=steered,
        )[0].shift_response
        for steered in (False, True)
    ]  # fmt: skip
    assert all("['classification']" in r for r in responses)
    assert "bank refresh" not in responses[0] and "bank refresh" in responses[1]
