"""RolloutConfig / VerifyConfig: reference defaults, constraints with messages that name the values."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bat.config.rollout import RolloutConfig
from bat.config.root import BatConfig
from bat.config.verify import VerifyConfig
from bat.rollout.budgets import BudgetUse, before_action, before_turn, cap_observation, turn_token_limit


def test_reference_defaults():
    cfg = RolloutConfig()
    b = cfg.budgets
    assert (b.max_assistant_turns, b.max_tool_calls, b.max_response_tokens, b.max_observation_chars) == (
        24,
        23,
        16384,
        2048,
    )
    assert cfg.k == 4 and cfg.temperature == 0.7 and cfg.engine == "hf"
    v = VerifyConfig()
    assert v.e2e_stage_weight == 0.5 and not v.judge.enabled
    assert BatConfig().rollout == cfg


def test_bad_values_are_rejected_with_what_is_valid():
    with pytest.raises(
        ValidationError, match="max_tool_calls \\(30\\) cannot exceed budgets.max_assistant_turns \\(24\\)"
    ):
        RolloutConfig.model_validate({"budgets": {"max_tool_calls": 30}})
    with pytest.raises(ValidationError, match="'hf', 'vllm', 'sglang' or 'openai'"):
        RolloutConfig(engine="tgi")
    with pytest.raises(ValidationError, match="Extra inputs"):
        VerifyConfig.model_validate({"judge": {"url": "x"}})


def test_budget_checks():
    b = RolloutConfig().budgets.model_copy(
        update={
            "max_assistant_turns": 2,
            "max_response_tokens": 100,
            "max_context_tokens": 1000,
            "max_new_tokens_per_turn": 64,
        }
    )
    assert before_turn(b, BudgetUse(turns=2), 10) == "max_turns"
    assert before_turn(b, BudgetUse(response_tokens=100), 10) == "max_response_tokens"
    assert before_turn(b, BudgetUse(), 1000) == "context_length"
    assert before_turn(b, BudgetUse(turns=1, response_tokens=50), 10) is None
    assert turn_token_limit(b, BudgetUse(response_tokens=90), 10) == 10
    assert turn_token_limit(b, BudgetUse(), 980) == 20
    assert before_action(b, BudgetUse(tool_calls=b.max_tool_calls)) == "max_tool_calls"
    shown, cut, reason = cap_observation(b, "y" * 3000)
    assert cut and reason is None and len(shown) == b.max_observation_chars
    assert cap_observation(b, "short") == ("short", False, None)
