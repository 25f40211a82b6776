"""The tool list in the policy's system turn: full JSON schemas or the compact form, the same for SFT and rollouts."""

import json

import pytest

from bat.benchmark import TOOL_SPECS
from bat.policy.tools import compact_tools, policy_tools


def test_compact_tools_keep_every_tool_and_parameter_in_fewer_characters():
    compact = compact_tools(TOOL_SPECS)
    assert [t["name"] for t in compact] == [t["name"] for t in TOOL_SPECS]
    run_model = next(t for t in compact if t["name"] == "run_model")
    assert run_model["args"].startswith('cases: list[string], normalize: none|unit_range|zscore = "none"')
    read = next(t for t in compact if t["name"] == "read_file")
    assert read["args"] == "path: string, max_chars: integer = 1500" and read["does"].startswith(
        "Read a workspace file"
    )
    for spec, short in zip(TOOL_SPECS, compact):
        assert all(name in short["args"] for name in spec["parameters"].get("properties", {}))
    assert len(json.dumps(compact)) * 2 < len(json.dumps(list(TOOL_SPECS)))


def test_policy_tools_by_format():
    assert policy_tools(False) is None and policy_tools(False, "compact") is None
    assert policy_tools(True) == list(TOOL_SPECS)
    assert policy_tools(True, "compact") == compact_tools(TOOL_SPECS)
    with pytest.raises(ValueError, match="valid"):
        policy_tools(True, "yaml")
