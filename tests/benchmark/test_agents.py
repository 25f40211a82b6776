"""Done-when checks of issue 3 on the held-out suite (scripted agents through the real tools, in-process)."""

import pytest

from bat.benchmark import aggregate, heldout_suite, run_instance, run_suite, suite_instance
from bat.benchmark.secret import HeldoutSecret
from bat.benchmark.tracks import TRACKS

SECRET = HeldoutSecret.from_text("tests")


@pytest.fixture(scope="module")
def cfg():
    from bat.config.root import BatConfig

    return BatConfig.model_validate({"benchmark": {"runtime": "inprocess", "repeats": 4}})


def test_expert_scores_at_least_95_overall_on_every_track(cfg):
    agg = aggregate(run_suite("expert", cfg, secret=SECRET))
    assert set(agg["tracks"]) == set(TRACKS)
    for track, row in agg["tracks"].items():
        assert row["overall"] >= 0.95, (track, row)
        assert row["agentic"] == 1.0


def test_noop_scores_at_most_10(cfg):
    scores = run_suite("noop", cfg, secret=SECRET)
    assert all(s.overall is not None and s.overall <= 0.10 for s in scores)
    assert aggregate(scores)["overall"] <= 0.10


def test_skip_validate_loses_task_on_pitfall_instances(cfg, tmp_path):
    losses = []
    runs = [r for r in heldout_suite(cfg, secret=SECRET) if suite_instance(r, cfg).pilot_revealed]
    assert len(runs) >= 7
    for run in runs:
        inst = suite_instance(run, cfg)
        skip = run_instance(inst, "skip-validate", tmp_path / f"{run.run_id}-skip", cfg).score
        expert = run_instance(inst, "expert", tmp_path / f"{run.run_id}-exp", cfg).score
        assert skip.stages["S3"] == 0.0 and skip.stages["S1"] == expert.stages["S1"] == 1.0
        assert skip.task < expert.task, (run.run_id, inst.pitfalls)
        losses.append(expert.task - skip.task)
    assert sum(losses) / len(losses) >= 0.3


@pytest.mark.parametrize("track", TRACKS)
def test_recovery_and_failure_variants_give_intended_verdicts(cfg, tmp_path, track):
    run = next(
        r
        for r in heldout_suite(cfg, "final", secret=SECRET)
        if r.track == track and suite_instance(r, cfg).pilot_revealed
    )
    inst = suite_instance(run, cfg)
    rec = run_instance(inst, "recovery", tmp_path / "rec", cfg)
    assert rec.score.items["S3"] == {
        "s3a_pilot_before_batch": True,
        "s3b_output_checked": True,
        "s3c_failure_fixed": True,
    }
    assert rec.score.stages["S3"] == 1.0 and rec.trajectory.outcome == "recovery"
    assert rec.score.overall >= 0.95
    fail = run_instance(inst, "failure", tmp_path / "fail", cfg)
    assert fail.score.items["S3"]["s3c_failure_fixed"] is False
    assert fail.score.stages["S3"] == 0.5 and fail.trajectory.outcome == "failure"
    assert fail.score.task < rec.score.task  # the unfixed pitfall costs Task (how much depends on the instance)
    assert fail.score.overall < rec.score.overall - 0.1
    assert [t.stage for t in rec.trajectory.turns if t.call["name"] == "run_model"] == ["S3", "S3", "S4"]
