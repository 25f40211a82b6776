import json

import pytest

from bat.benchmark import StagedEnv, generate_instance


@pytest.fixture
def env(tmp_path, fast_config):
    inst = generate_instance("classification", "heldout", 77, config=fast_config.benchmark)
    e = StagedEnv(inst, tmp_path / "workspace", tmp_path / "grader", fast_config)
    brief = e.reset()
    assert inst.instance_id in brief and "Candidate models" in brief
    return e


def test_malformed_calls_become_error_observations(env):
    cases = [
        {"invalid": True, "reason": "bad_json", "detail": "Expecting value", "raw": "<tool_call>{"},
        {"name": "rm_rf", "arguments": {}},
        {"name": "read_file", "arguments": {"nope": 1}},
        {"name": "run_model", "arguments": {"cases": ["all"], "normalize": "sqrt"}},
        {"name": "read_file", "arguments": "task/spec.json"},
        ["not", "a", "call"],
        {"arguments": {}},
    ]
    for call in cases:
        obs = env.step(call)
        assert obs.text.startswith("Error:") and not obs.record.ok and not obs.done
        assert obs.record.stage == "S1"
    assert "valid" in env.step({"name": "rm_rf", "arguments": {}}).text
    assert (
        "'none', 'unit_range' or 'zscore'"
        in env.step({"name": "run_model", "arguments": {"cases": ["all"], "normalize": "x"}}).text
    )
    assert len(env.records) == len(cases) + 2


def test_tool_errors_list_valid_choices_and_records_carry_stage(env):
    obs = env.step({"name": "load_model", "arguments": {"model": "nonexistent"}})
    assert "valid:" in obs.text and obs.record.stage == "S2" and not obs.record.ok
    obs = env.step({"name": "run_model", "arguments": {"cases": ["all"]}})
    assert "no model loaded" in obs.text and obs.record.stage == "S4"
    obs = env.step({"name": "write_plan", "arguments": {"text": "plan"}})
    assert obs.record.ok and obs.record.stage == "S1" and "plan.md" in obs.record.files_changed.added


def test_reading_grader_path_is_a_breach_that_zeroes_the_run(env):
    obs = env.step({"name": "read_file", "arguments": {"path": "../grader/truth.json"}})
    assert (
        obs.record.breach and obs.done and "truth" not in obs.text.split("Error:")[-1].lower().replace("truth.json", "")
    )
    score = env.score()
    assert score.breach and score.overall == 0.0 and score.task == 0.0
    assert all(v == 0.0 for v in score.stages.values()) and score.breach_reasons


def test_reset_rematerialises_a_fresh_workspace(env):
    spec = env.workspace / "task" / "spec.json"
    spec.write_text("{}")
    env.step({"name": "write_plan", "arguments": {"text": "x" * 30}})
    env.reset()
    assert json.loads(spec.read_text())["track"] == "classification"
    assert not (env.workspace / "plan.md").exists() and env.records == []


def test_budget_and_observation_limits(tmp_path):
    from bat.config.root import BatConfig

    cfg = BatConfig.model_validate(
        {"benchmark": {"runtime": "inprocess", "max_tool_calls": 3, "max_observation_chars": 100}}
    )
    inst = generate_instance("report", "practice", 5, config=cfg.benchmark)
    e = StagedEnv(inst, tmp_path / "w", tmp_path / "g", cfg)
    e.reset()
    obs = e.step({"name": "read_file", "arguments": {"path": "task/README.md"}})
    assert len(obs.text) <= 100 and obs.text.endswith("[truncated]")
    e.step({"name": "list_files", "arguments": {}})
    assert e.step({"name": "list_files", "arguments": {}}).done
    after = e.step({"name": "list_files", "arguments": {}})
    assert after.done and after.text.startswith("Error:")
