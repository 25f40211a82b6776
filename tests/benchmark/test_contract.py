import math

import pytest

from bat.benchmark.contract import agentic, check_stage_keys, evidence_requirements, overall, rubric, stage_score
from bat.config.stages import DEFAULT_STAGES, StageSpec


def test_default_weights_and_overall_from_unrounded_values():
    scores = {"S1": 1.0, "S2": 0.5, "S3": 0.5, "S4": 0.75, "S5": 0.0}
    expected = 0.25 * 1.0 + 0.15 * 0.5 + 0.35 * 0.5 + 0.15 * 0.75 + 0.10 * 0.0
    assert math.isclose(agentic(scores, DEFAULT_STAGES), expected)
    assert math.isclose(overall(0.333333, expected), 0.5 * 0.333333 + 0.5 * expected)


def test_not_applicable_stage_is_dropped_and_weights_renormalised():
    scores = {"S1": 1.0, "S2": 0.0, "S3": 1.0, "S4": 1.0, "S5": 1.0}
    value = agentic(scores, DEFAULT_STAGES, not_applicable=["S2"])
    assert math.isclose(value, 1.0)
    assert agentic(scores, DEFAULT_STAGES) < 1.0


def test_null_stage_is_null_not_zero():
    scores = {"S1": 1.0, "S2": None, "S3": 1.0, "S4": 1.0, "S5": 1.0}
    assert agentic(scores, DEFAULT_STAGES) is None
    assert overall(1.0, None) is None
    assert stage_score("S1", {"s1a_plan_md": True, "s1b_plan_pipeline": None}) is None


def test_stage_formulas():
    assert stage_score("S3", {"s3a_pilot_before_batch": False, "s3b_output_checked": True}) == 0.0
    assert stage_score("S3", {"s3a_pilot_before_batch": True, "s3b_output_checked": False}) == 0.5
    assert (
        stage_score("S3", {"s3a_pilot_before_batch": True, "s3b_output_checked": True, "s3c_failure_fixed": False})
        == 0.5
    )
    assert (
        stage_score("S3", {"s3a_pilot_before_batch": True, "s3b_output_checked": True, "s3c_failure_fixed": True})
        == 1.0
    )
    assert stage_score("S3", {"s3a_pilot_before_batch": True, "s3b_output_checked": True}) == 1.0
    assert stage_score("S4", {"s4a_all_cases_run": False, "s4b_format_valid": True}, {"completion_rate": 0.5}) == 0.75
    assert stage_score("S5", {"s5a_has_valid_results": True, "s5b_format_valid": False}) == 0.5
    assert stage_score("S2", {"a": True, "b": False, "c": True, "d": True}) == 0.75


def test_rubric_ids_mirror_automedbench_and_reference_evidence():
    s1 = [i.id for i in rubric("S1", "detection")]
    assert s1 == ["s1a_plan_md", "s1b_plan_pipeline", "s1c_detection_model", "s1d_researched_3"]
    s2 = [i.id for i in rubric("S2", "vqa")]
    assert s2 == [
        "s2a_checkpoint_downloaded",
        "s2b_compatibility_check",
        "s2c_env_setup_success",
        "s2d_env_fail_within_5",
        "s2e_model_loaded",
    ]
    for key in ("S1", "S2", "S3", "S4", "S5"):
        ev_ids = {e.id for e in evidence_requirements(key)}
        for item in rubric(key, "report"):
            assert set(item.evidence) <= ev_ids, item.id
            assert not item.judgment or item.proxy


def test_unknown_stage_keys_are_refused_with_valid_list():
    with pytest.raises(ValueError, match="valid keys"):
        check_stage_keys([StageSpec(key="S9", name="x", weight=1.0)])
    with pytest.raises(ValueError, match="valid"):
        rubric("S7", "vqa")
