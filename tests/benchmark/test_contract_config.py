"""The benchmark contract (rubric items, evidence, stage formulas) comes from `benchmark.contract`."""

import pytest
from pydantic import ValidationError

from bat.bank.synthesize import fingerprint, synthesize
from bat.benchmark import StagedEnv, generate_instance, run_agent
from bat.benchmark.contract import evidence_requirements, rubric
from bat.config import load_config
from bat.config.contract import BUILTIN_CONTRACT
from bat.config.root import BatConfig
from bat.state.layout import RunLayout
from bat.verify.phase import make_verifier

REWORDED = "The loaded model's compatibility was confirmed with check_compatibility first."


def _with_contract(base: BatConfig, stages: dict) -> BatConfig:
    """`base` with `benchmark.contract.stages` replaced by `stages` (plain dicts)."""
    data = base.model_dump(mode="json")
    data["benchmark"]["contract"] = {"stages": stages}
    return BatConfig.model_validate(data)


def _builtin_dicts() -> dict:
    return {k: v.model_dump(mode="json") for k, v in BUILTIN_CONTRACT.items()}


def _custom(base: BatConfig) -> BatConfig:
    """S2's compatibility item reworded; S1 without its research item (s1d) and research evidence."""
    stages = _builtin_dicts()
    for item in stages["S2"]["items"]:
        if item["id"] == "s2b_compatibility_check":
            item["text"] = REWORDED
    stages["S1"]["items"] = [i for i in stages["S1"]["items"] if i["id"] != "s1d_researched_3"]
    stages["S1"]["evidence"] = [e for e in stages["S1"]["evidence"] if e["id"] != "e1_research_records"]
    return _with_contract(base, stages)


def test_default_contract_is_the_builtin_one_with_per_track_ids():
    items = rubric("S1", "vqa")
    assert [i.id for i in items] == ["s1a_plan_md", "s1b_plan_pipeline", "s1c_vqa_model", "s1d_researched_3"]
    assert [i.id for i in items if i.judgment] == ["s1b_plan_pipeline", "s1c_vqa_model"]
    assert [e.id for e in evidence_requirements("S3")] == ["e3_pilot_record", "e3_check_record"]


def test_configured_items_drive_grading_rows_and_judge_texts(tmp_path, fast_config):
    cfg = _custom(fast_config)
    inst = generate_instance("report", "practice", 3, config=cfg.benchmark)
    env = StagedEnv(inst, tmp_path / "ws", tmp_path / "g", cfg)
    env.reset()
    run_agent(env, inst, "noop")  # no research, no plan: s1d would be False if it were graded
    score = env.score()
    assert "s1d_researched_3" not in score.items["S1"] and set(score.evidence["S1"]) == {
        "e1_plan_artifact",
        "e1_plan_record",
    }
    builtin_env = StagedEnv(inst, tmp_path / "ws2", tmp_path / "g2", fast_config)
    builtin_env.reset()
    run_agent(builtin_env, inst, "noop")
    assert "s1d_researched_3" in builtin_env.score().items["S1"]

    verifier = make_verifier(cfg)
    assert verifier.judgment_items("S1", "report") == {
        "s1b_plan_pipeline": "The plan describes the pipeline: setup, pilot/validation, full inference, submission.",
        "s1c_report_model": "The plan names the model that fits the task's modality.",
    }
    assert any(i.text == REWORDED for i in rubric("S2", "report", cfg.benchmark.contract))


def test_a_bank_carries_the_configured_item_texts_and_its_fingerprint_follows_the_contract(tmp_path):
    base = load_config(
        None,
        [
            "bank.tracks=[classification]",
            "bank.tasks_per_track=1",
            "bank.e2e_per_track=1",
            "benchmark.runtime=inprocess",
        ],
    )
    cfg = _custom(base)
    assert fingerprint(_with_contract(base, _builtin_dicts())) == fingerprint(base)
    assert fingerprint(cfg) != fingerprint(base)
    bank, reused = synthesize(cfg, RunLayout(tmp_path / "run"))
    assert not reused
    rows = bank.rows()
    s2 = [r for r in rows if r.stage == "S2"]
    assert s2 and all(REWORDED in [i.text for i in r.rubric] for r in s2)
    s1_and_e2e = [r for r in rows if r.stage in ("S1", "E2E")]
    assert s1_and_e2e and all("s1d_researched_3" not in {i.id for i in r.rubric} for r in s1_and_e2e)


def test_builtin_benchmark_refuses_items_its_grader_cannot_compute():
    stages = _builtin_dicts()
    stages["S2"]["items"].append({"id": "s2f_gpu_visible", "text": "A GPU was visible."})
    with pytest.raises(ValidationError, match=r"s2f_gpu_visible.*not computed by the built-in grader.*s2a_"):
        _with_contract(BatConfig(), stages)


def test_formula_needs_its_items_and_items_need_declared_evidence():
    stages = _builtin_dicts()
    stages["S3"]["items"] = [i for i in stages["S3"]["items"] if i["id"] != "s3b_output_checked"]
    with pytest.raises(ValidationError, match=r"pilot_ladder.*s3b_output_checked"):
        _with_contract(BatConfig(), stages)
    stages = _builtin_dicts()
    stages["S4"]["items"][0]["evidence"] = ["e9_nowhere"]
    with pytest.raises(ValidationError, match=r"unknown evidence \['e9_nowhere'\]"):
        _with_contract(BatConfig(), stages)


def test_an_external_benchmark_defines_its_own_stages():
    own = {
        "R1": {
            "items": [{"id": "r1a_reads_data", "text": "The data was read first.", "evidence": ["r1_read"]}],
            "evidence": [{"id": "r1_read", "text": "a read record"}],
        },
        "R2": {"items": [{"id": "r2a_report", "text": "A report was written.", "judgment": True}]},
    }
    data = {
        "benchmark": {"kind": "external", "external": {"command": ["eval", "{output}"]}, "contract": {"stages": own}},
        "stages": [{"key": "R1", "name": "Read", "weight": 0.5}, {"key": "R2", "name": "Report", "weight": 0.5}],
    }
    cfg = BatConfig.model_validate(data)
    assert [i.id for i in rubric("R2", "any", cfg.benchmark.contract) if i.judgment] == ["r2a_report"]
    data["stages"].append({"key": "R3", "name": "Extra", "weight": 0.0001})
    data["stages"][0]["weight"] = 0.4999
    with pytest.raises(ValidationError, match=r"stages \['R3'\] have no contract.*defined: \['R1', 'R2'\]"):
        BatConfig.model_validate(data)
    with pytest.raises(ValidationError, match="built-in grader has no stage R1"):
        BatConfig.model_validate({**data, "benchmark": {"contract": {"stages": own}}})
