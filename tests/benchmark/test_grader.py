from bat.benchmark import StagedEnv, generate_instance, run_agent
from bat.config.root import BatConfig


def _expert_env(tmp_path, cfg, track="report", seed=9):
    inst = generate_instance(track, "heldout", seed, config=cfg.benchmark)
    env = StagedEnv(inst, tmp_path / "ws", tmp_path / "g", cfg)
    env.reset()
    run_agent(env, inst, "expert")
    return env, inst


def test_judge_decides_judgment_items_and_down_judge_is_null(tmp_path, fast_config):
    env, inst = _expert_env(tmp_path, fast_config)
    assert env.score().overall >= 0.95
    seen = []
    strict = env.score(judge=lambda item, text: seen.append(item.id) or False, judge_name="test-judge")
    assert sorted(seen) == ["s1b_plan_pipeline", f"s1c_{inst.track}_model"]
    assert (
        strict.items["S1"]["s1b_plan_pipeline"] is False and strict.stages["S1"] == 0.5 and strict.judge == "test-judge"
    )
    down = env.score(judge=lambda item, text: None)
    assert down.stages["S1"] is None and down.agentic is None and down.overall is None
    assert not down.valid and down.null_reasons and down.task is not None


def test_configured_stage_subset_renormalises(tmp_path):
    cfg = BatConfig.model_validate(
        {
            "benchmark": {"runtime": "inprocess"},
            "stages": [
                {"key": "S3", "name": "Validate", "weight": 0.5},
                {"key": "S5", "name": "Submit", "weight": 0.5},
            ],
        }
    )
    env, _ = _expert_env(tmp_path, cfg, "vqa", 4)
    score = env.score()
    assert set(score.stages) == {"S3", "S5"} and score.agentic == 1.0


def test_prose_without_execution_earns_no_stage_credit(tmp_path, fast_config):
    inst = generate_instance("detection", "heldout", 21, config=fast_config.benchmark)
    env = StagedEnv(inst, tmp_path / "ws", tmp_path / "g", fast_config)
    env.reset()
    env.step(
        {
            "name": "write_plan",
            "arguments": {"text": f"I piloted {inst.fitting_model}, validated, ran inference and submitted."},
        }
    )
    score = env.score()
    assert score.stages["S3"] == 0.0 and score.stages["S4"] == 0.0 and score.stages["S5"] == 0.0 and score.task == 0.0


def test_execute_code_is_offered_only_when_configured(tmp_path):
    cfg = BatConfig.model_validate({"benchmark": {"runtime": "inprocess", "execute_code": True}})
    inst = generate_instance("vqa", "practice", 2, config=cfg.benchmark)
    env = StagedEnv(inst, tmp_path / "ws", tmp_path / "g", cfg)
    env.reset()
    obs = env.step(
        {
            "name": "execute_code",
            "arguments": {"language": "python", "code": "open('note.txt','w').write('hi'); print('done')"},
        }
    )
    assert (
        obs.record.kind == "code"
        and obs.record.ok
        and "done" in obs.text
        and "note.txt" in obs.record.files_changed.added
    )
    off = StagedEnv(
        inst, tmp_path / "ws2", tmp_path / "g2", BatConfig.model_validate({"benchmark": {"runtime": "inprocess"}})
    )
    off.reset()
    assert off.step({"name": "execute_code", "arguments": {"language": "bash", "code": "ls"}}).text.startswith(
        "Error: unknown tool"
    )


def test_outputs_written_by_execute_code_count_for_completion_but_not_as_pilot(tmp_path):
    cfg = BatConfig.model_validate(
        {"benchmark": {"runtime": "inprocess", "execute_code": True, "pitfall_probability": 0.0}}
    )
    inst = generate_instance("segmentation", "practice", 6, config=cfg.benchmark)
    env = StagedEnv(inst, tmp_path / "ws", tmp_path / "g", cfg)
    env.reset()
    code = (
        "import json, numpy as np\nspec = json.load(open('task/spec.json'))\n"
        "for c in spec['cases']:\n    np.save(f'outputs/{c}.npy', np.zeros(spec['output']['shape'], dtype=np.uint8))\n"
    )
    env.step({"name": "execute_code", "arguments": {"language": "bash", "code": "mkdir -p outputs"}})
    obs = env.step({"name": "execute_code", "arguments": {"language": "python", "code": code}})
    assert obs.record.ok, obs.text
    score = env.score()
    assert score.measures["completion_rate"] == 1.0 and score.items["S4"]["s4a_all_cases_run"] is True
    assert score.items["S4"]["s4b_format_valid"] is False
    assert score.stages["S3"] == 0.0
