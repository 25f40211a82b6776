"""Aggregation math against a hand-computed table (repeats within a track, then the mean of track means)."""

import pytest

from bat.evaluate.aggregate import aggregate_runs, half_width, pct, pct_delta, run_metrics
from bat.evaluate.compare import paired_compare
from bat.schemas.evaluation import EvalRun

W = {"S1": 0.25, "S2": 0.15, "S3": 0.35, "S4": 0.15, "S5": 0.10}
KEYS = tuple(W)

# track, repeat, stages, task  -> hand-computed Agentic / Overall in comments
TABLE = [
    ("A", 0, dict(S1=1, S2=1, S3=0.5, S4=1, S5=1), 0.8),  # agentic .825    overall .8125
    ("A", 1, dict(S1=0, S2=1, S3=0, S4=0.5, S5=1), 0.2),  # agentic .325    overall .2625
    ("B", 0, dict(S1=1, S2=1, S3=1, S4=1, S5=1), 1.0),  # agentic 1       overall 1
    ("B", 1, dict(S1=1, S2=0, S3=1, S4=1, S5=0), 0.0),  # agentic .75     overall .375
    ("B", 2, dict(S1=1, S2=1, S3=0, S4=1), 0.6),  # S5 n/a: agentic .55/.9 = .61111  overall .60556
    ("C", 0, dict(S1=0.5, S2=0.5, S3=0.5, S4=0.5, S5=0.5), 0.5),  # agentic .5      overall .5
    ("C", 1, dict(S1=0.5, S2=0.5, S3=0.5, S4=0.5, S5=0.5), 0.3),  # agentic .5      overall .4
]


def _runs(table=TABLE, split="controller"):
    runs = []
    for track, rep, stages, task in table:
        agentic, overall = run_metrics(stages, task, W)
        runs.append(
            EvalRun(
                run_id=f"{track}-{rep}",
                split=split,
                track=track,
                repeat=rep,
                seed=rep,
                stages=stages,
                task=task,
                agentic=agentic,
                overall=overall,
            )
        )
    return runs


def _agg(runs):
    return aggregate_runs(
        runs,
        stage_keys=KEYS,
        round_index=1,
        checkpoint="c",
        checkpoint_digest="d",
        suite_version="s",
        harness_version="h",
        manifest_digest="m",
    )


def test_run_metrics_by_hand():
    assert run_metrics(TABLE[0][2], 0.8, W) == pytest.approx((0.825, 0.8125))
    assert run_metrics(TABLE[4][2], 0.6, W) == pytest.approx((0.55 / 0.9, 0.3 + 0.275 / 0.9))
    assert run_metrics({"S1": None, "S2": 1}, 0.5, W) == (None, None)
    assert run_metrics({"S1": 1.0}, None, W) == (1.0, None)
    assert run_metrics({"S1": 1.0}, 1.0, W, breach=True) == (0.0, 0.0)
    with pytest.raises(ValueError, match="valid"):
        run_metrics({"S7": 1.0}, 1.0, W)


def test_two_level_aggregation_matches_hand_table():
    agg = _agg(_runs())
    assert agg.tracks["A"].overall == pytest.approx(0.5375)
    assert agg.tracks["B"].overall == pytest.approx((1 + 0.375 + 0.3 + 0.275 / 0.9) / 3)
    assert agg.tracks["C"].overall == pytest.approx(0.45)
    assert agg.tracks["A"].stages["S3"] == pytest.approx(0.25)
    assert agg.tracks["B"].stages["S5"] == pytest.approx(0.5)  # mean over the 2 runs where S5 applies
    assert agg.overall == pytest.approx(0.5492283950617284)
    assert agg.agentic == pytest.approx(0.620679012345679)
    assert agg.task == pytest.approx((0.5 + 1.6 / 3 + 0.4) / 3)
    assert agg.stages["S1"] == pytest.approx((0.5 + 1.0 + 0.5) / 3)
    # not the pooled mean over all 7 runs
    pooled = sum(r.overall for r in _runs()) / 7
    assert abs(agg.overall - pooled) > 1e-3
    # half-width across the 3 track means: t(0.975, 2) * sd / sqrt(3)
    assert agg.half_widths["overall"] == pytest.approx(4.302652729749464 * 0.10558228760486121 / 3**0.5)
    assert agg.routable and not agg.null_cells and agg.n_runs == 7
    assert pct(agg.overall) == "54.9" and pct_delta(0.5, agg.overall) == "+4.9"


def test_null_cells_are_reported_and_block_routing():
    table = list(TABLE)
    table[1] = ("A", 1, dict(S1=0, S2=None, S3=0, S4=0.5, S5=1), 0.2)
    runs = _runs(table)
    runs[1] = runs[1].model_copy(update={"null_reason": "judge unavailable"})
    agg = _agg(runs)
    assert not agg.routable
    assert [(c.track, c.repeat, c.field, c.reason) for c in agg.null_cells] == [("A", 1, "S2", "judge unavailable")]
    assert agg.tracks["A"].overall is None and agg.overall is None and agg.stages["S2"] is None
    assert agg.stages["S1"] is not None  # unaffected stages still reported
    assert agg.tracks["B"].overall == pytest.approx((1 + 0.375 + 0.3 + 0.275 / 0.9) / 3)


def test_half_width_edge_cases_and_mixed_splits():
    assert half_width([0.4]) is None
    assert half_width([0.5, 0.5, 0.5]) == 0.0
    runs = _runs()
    runs[0] = runs[0].model_copy(update={"split": "final"})
    with pytest.raises(ValueError, match="splits"):
        _agg(runs)


def test_paired_comparison_per_track():
    a = _agg(_runs())
    better = [(t, r, {k: min(1.0, v + 0.1) for k, v in s.items()}, min(1.0, task + 0.1)) for t, r, s, task in TABLE]
    b = _agg(_runs(better)).model_copy(update={"checkpoint": "c2"})
    cmp = paired_compare(a, b, "overall")
    assert set(cmp.deltas) == {"A", "B", "C"} and cmp.n_tracks == 3
    assert cmp.mean_delta == pytest.approx(sum(cmp.deltas.values()) / 3)
    assert cmp.deltas["C"] == pytest.approx(0.1)
    assert cmp.p_value is not None and 0 <= cmp.p_value <= 1
    assert paired_compare(a, b, "S3").deltas["A"] == pytest.approx(0.1)
    with pytest.raises(ValueError, match="valid"):
        paired_compare(a, b, "bogus")
