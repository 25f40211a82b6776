import numpy as np
import pytest

from bat.benchmark.metrics import average_precision, dice, keyword_f1, ssim
from bat.benchmark.tracks import TRACKS, get_track


def test_metrics_on_known_values():
    assert average_precision([("a", 0.9, [0, 0, 4, 4])], {"a": [[0, 0, 4, 4]]}) == 1.0
    assert average_precision([("a", 0.9, [10, 10, 12, 12])], {"a": [[0, 0, 4, 4]]}) == 0.0
    truth = np.zeros((4, 4), dtype=np.uint8)
    truth[:2] = 1
    assert dice(truth, truth, (1, 2)) == 1.0
    assert dice(np.zeros_like(truth), truth, (1,)) == 0.0
    assert keyword_f1("Findings: nodule, effusion.", ["nodule"], ["nodule", "effusion"]) == pytest.approx(2 / 3)
    img = np.random.default_rng(0).random((12, 12))
    assert ssim(img, img) == pytest.approx(1.0)
    assert ssim(np.full((12, 12), np.nan), img) == 0.0


@pytest.mark.parametrize("name", TRACKS)
def test_fitting_model_solves_track_and_raw_input_is_degenerate(name):
    track = get_track(name)
    rng = np.random.default_rng(1)
    modality = next(iter(track.profiles))
    cases = {f"c{i}": track.make_case(rng, modality) for i in range(6)}
    extras = {c: {**d.extra, "input_shape": list(d.unit.shape)} for c, d in cases.items()}
    preds = {c: track.apply(track.profiles[modality], d.unit, extras[c]) for c, d in cases.items()}
    score, metrics = track.score(preds, {c: d.truth for c, d in cases.items()}, extras)
    assert score >= 0.95 and metrics
    assert track.degenerate(preds) is None
    raw = {c: track.apply(track.profiles[modality], d.unit * 3000.0 + 1000.0, extras[c]) for c, d in cases.items()}
    assert track.degenerate(raw) is not None
    shape = tuple(next(iter(cases.values())).unit.shape)
    contract = track.contract(shape)
    c0 = next(iter(cases))
    contract0 = {**contract, **({"choices": extras[c0]["choices"]} if "choices" in extras[c0] else {})}
    assert track.check_case(preds[c0], contract0) == []
    assert track.check_case(track.to_alt(preds[c0], extras[c0]), contract0) != []
    back = track.from_alt(track.to_alt(preds[c0], extras[c0]), extras[c0])
    assert track.check_case(back, contract0) == []
