from __future__ import annotations

import hashlib
import json

import pytest

from bat.policy.chat import encode_messages, encode_prompt, render_messages
from bat.policy.codec import ToolCall, parse_tool_call, render_tool_call
from bat.policy.loader import check_model_dir, load_policy
from bat.policy.tiny import build_tiny_model
from bat.state.model_files import read_build_info

MESSAGES = [
    {"role": "system", "content": "You are an agent."},
    {"role": "user", "content": "Plan the task."},
    {
        "role": "assistant",
        "content": "Listing first.",
        "tool_calls": [{"name": "list_files", "arguments": {"path": "."}}],
    },
    {"role": "tool", "content": "a.txt\nb.txt"},
    {"role": "assistant", "content": render_tool_call({"name": "read_file", "arguments": {"path": "a.txt"}})},
]


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_builder_is_deterministic(tiny_dir, small_cfg, tmp_path):
    again = build_tiny_model(tmp_path / "again", small_cfg, seed=7)
    for name in ("tokenizer.json", "model.safetensors", "config.json"):
        assert _digest(tiny_dir / name) == _digest(again / name), name
    other = build_tiny_model(tmp_path / "other", small_cfg, seed=8)
    assert _digest(tiny_dir / "model.safetensors") != _digest(other / "model.safetensors")
    info = read_build_info(tiny_dir)
    assert info["seed"] == 7 and info["tiny"]["hidden_size"] == 64 and info["parameters"] > 0


def test_load_policy_offline_and_chat_template(tiny_dir):
    policy = load_policy(tiny_dir)
    assert policy.model.config.model_type == "qwen3"
    tok = policy.tokenizer
    assert (tiny_dir / "chat_template.jinja").exists()
    text = render_messages(tok, MESSAGES, tools=[{"name": "list_files", "parameters": {}}])
    assert text.startswith("<|im_start|>system\nYou are an agent.\n\n# Tools\n")
    assert "<|im_start|>tool\na.txt\nb.txt<|im_end|>\n" in text
    assert 'Listing first.\n<tool_call>{"name": "list_files", "arguments": {"path": "."}}</tool_call><|im_end|>' in text
    # markers are single tokens and survive decoding
    ids = tok("<tool_call>x</tool_call>", add_special_tokens=False)["input_ids"]
    assert len(ids) == 3 and tok.decode(ids, skip_special_tokens=True) == "<tool_call>x</tool_call>"


def test_encode_messages_masks_exactly_the_target(tiny_dir):
    policy = load_policy(tiny_dir)
    tok = policy.tokenizer
    ids, mask = encode_messages(tok, MESSAGES)
    assert len(ids) == len(mask)
    target = tok.decode([i for i, m in zip(ids, mask) if m])
    assert target == MESSAGES[-1]["content"] + "<|im_end|>"
    prompt = encode_prompt(tok, MESSAGES[:-1])
    assert ids[: len(prompt)] == prompt and not any(mask[: len(prompt)])
    assert isinstance(parse_tool_call(target), ToolCall)


def test_bad_roles_and_paths_are_rejected(tiny_dir, tmp_path):
    policy = load_policy(tiny_dir)
    with pytest.raises(ValueError, match="valid roles"):
        render_messages(policy.tokenizer, [{"role": "robot", "content": "x"}])
    with pytest.raises(ValueError, match="last message must be the assistant"):
        encode_messages(policy.tokenizer, MESSAGES[:2])
    with pytest.raises(FileNotFoundError, match="hub ids are not allowed"):
        check_model_dir("Qwen/Qwen3-0.6B")
    (tmp_path / "config.json").write_text(json.dumps({}))
    with pytest.raises(FileNotFoundError, match="model.safetensors"):
        check_model_dir(tmp_path)
    with pytest.raises(ValueError, match="valid dtypes"):
        load_policy(tiny_dir, dtype="int3")


def test_damaged_model_folders_name_the_folder_and_what_to_do(tiny_dir, tmp_path, capsys):
    import shutil

    from bat.cli.main import main
    from bat.policy.loader import ModelFolderError, load_model
    from bat.state.errors import StateFileError

    torn = tmp_path / "torn"
    shutil.copytree(tiny_dir, torn)
    weights = torn / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(ModelFolderError, match="cannot load the weights .*damaged or incomplete") as info:
        load_model(torn)
    assert isinstance(info.value, StateFileError) and str(torn) in str(info.value)
    (torn / "config.json").unlink()
    with pytest.raises(ModelFolderError, match="lacks config.json"):
        load_model(torn)
    config = tmp_path / "cfg.yaml"
    config.write_text("benchmark:\n  tracks: [classification]\n  repeats: 1\n  runtime: inprocess\n")
    code = main(
        ["evaluate", "run", "--config", str(config), "--state", str(tmp_path / "run"), "--checkpoint", str(torn)]
    )
    assert code == 2 and "lacks config.json" in capsys.readouterr().err
