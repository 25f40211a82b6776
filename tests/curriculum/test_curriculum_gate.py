"""Each promotion-gate threshold holding and failing (reference defaults)."""

import pytest

from bat.config.curriculum import GateConfig
from bat.curriculum.decide import snapshot
from bat.curriculum.gate import evaluate_gate
from bat.schemas.routing import TrainingHealth

G = GateConfig()
STAGES = {"S1": 0.5, "S2": 0.5, "S3": 0.5, "S4": 0.5, "S5": 0.5}


def _check(result, name):
    return next(c for c in result.checks if c.name == name)


@pytest.fixture
def best(make_agg):
    return snapshot(make_agg(1, 0.5, stages=STAGES))


def test_identical_candidate_passes_every_check(best):
    result = evaluate_gate(best, best, TrainingHealth(total=10), G)
    assert result.passed and not result.failed
    names = {c.name for c in result.checks}
    assert {
        "overall_drop",
        "task_drop",
        "track_drop",
        "catastrophic",
        "training_health",
        "late_stage_drop:S3",
        "late_stage_drop:S4",
        "late_stage_drop:S5",
    } <= names


@pytest.mark.parametrize("overall, ok", [(0.49, True), (0.485, False)])
def test_overall_drop(make_agg, best, overall, ok):
    cand = snapshot(
        make_agg(
            2, overall, task=0.5, stages=STAGES, tracks={"classification": 0.5, "detection": 0.5, "segmentation": 0.5}
        )
    )
    assert _check(evaluate_gate(cand, best, None, G), "overall_drop").passed is ok


@pytest.mark.parametrize("task, ok", [(0.47, True), (0.46, False)])
def test_task_drop(make_agg, best, task, ok):
    cand = snapshot(
        make_agg(
            2, 0.5, task=task, stages=STAGES, tracks={"classification": 0.5, "detection": 0.5, "segmentation": 0.5}
        )
    )
    assert _check(evaluate_gate(cand, best, None, G), "task_drop").passed is ok


@pytest.mark.parametrize("track, ok", [(0.45, True), (0.44, False)])
def test_track_drop(make_agg, best, track, ok):
    cand = snapshot(
        make_agg(2, 0.5, stages=STAGES, tracks={"classification": 0.55, "detection": track, "segmentation": 0.5})
    )
    check = _check(evaluate_gate(cand, best, None, G), "track_drop")
    assert check.passed is ok and "detection" in check.detail


@pytest.mark.parametrize("stage", ["S3", "S4", "S5"])
@pytest.mark.parametrize("value, ok", [(0.47, True), (0.46, False)])
def test_late_stage_drop(make_agg, best, stage, value, ok):
    cand = snapshot(make_agg(2, 0.5, stages={**STAGES, stage: value}))
    result = evaluate_gate(cand, best, None, G)
    assert _check(result, f"late_stage_drop:{stage}").passed is ok
    assert result.passed is ok


def test_early_stage_drop_is_not_a_late_stage_check(make_agg, best):
    cand = snapshot(make_agg(2, 0.5, stages={**STAGES, "S1": 0.4}))
    assert evaluate_gate(cand, best, None, G).passed  # S1 -0.10 is below the catastrophic bound


@pytest.mark.parametrize("value, ok", [(0.31, True), (0.30, False)])
def test_catastrophic_drop(make_agg, best, value, ok):
    cand = snapshot(make_agg(2, 0.5, stages={**STAGES, "S1": value}))
    check = _check(evaluate_gate(cand, best, None, G), "catastrophic")
    assert check.passed is ok and "stage:S1" in check.detail


@pytest.mark.parametrize(
    "health, ok",
    [
        (TrainingHealth(metrics_finite=True, aborted=2, total=8), True),
        (TrainingHealth(metrics_finite=True, aborted=3, total=8), False),
        (TrainingHealth(metrics_finite=False, aborted=0, total=8), False),
    ],
)
def test_training_health(best, health, ok):
    result = evaluate_gate(best, best, health, G)
    assert _check(result, "training_health").passed is ok
    assert result.passed is ok


def test_thresholds_are_configurable(make_agg, best):
    cand = snapshot(
        make_agg(
            2, 0.45, task=0.5, stages=STAGES, tracks={"classification": 0.5, "detection": 0.5, "segmentation": 0.5}
        )
    )
    assert not evaluate_gate(cand, best, None, G).passed
    assert evaluate_gate(cand, best, None, GateConfig(max_overall_drop=0.05)).passed


def test_training_health_read_from_done_counts(tmp_path):
    from bat.curriculum.history import training_health
    from bat.state.layout import RunLayout
    from bat.state.markers import write_done

    layout = RunLayout(tmp_path / "run")
    assert training_health(layout, 0) is None and training_health(layout, 1) is None
    write_done(
        layout.phase_dir(1, "rollout"),
        phase="rollout",
        config_hash="h",
        round_index=1,
        counts={"rollouts": 32, "valid": 28},
    )
    write_done(layout.phase_dir(1, "grpo"), phase="grpo", config_hash="h", round_index=1, counts={"loss": float("nan")})
    health = training_health(layout, 1)
    assert (health.aborted, health.total, health.metrics_finite) == (4, 32, False)
    assert not evaluate_gate(snapshot_of_best(), snapshot_of_best(), health, G).passed


def snapshot_of_best():
    from curriculum_helpers import build_agg

    return snapshot(build_agg(1, 0.5, stages=STAGES))
