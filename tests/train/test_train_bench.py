"""`bat bench train` runs end to end at toy sizes and prints one row per (preset, mode)."""

from __future__ import annotations

import pytest

from bat.cli.main import main


@pytest.mark.slow
def test_bench_train_prints_figures(capsys):
    code = main(
        ["bench", "train", "--presets", "tiny", "--steps", "2", "--seq-len", "32", "--batch", "2", "--micro", "2"]
        + ["--prompts", "shared"]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "tokens/s" in out and "peak MiB" in out and "DS/plain" in out
    rows = [line for line in out.splitlines() if "│   tiny" in line or "│ tiny" in line]
    assert len(rows) == 3 and any(" sft " in r for r in rows)
    assert any("grpo, behavior ref" in r for r in rows) and any("grpo, checkpoint ref" in r for r in rows)
    for ref in ("behavior", "checkpoint"):
        assert (
            f"tiny (targets logits, KL {ref} ref, shared prompts): grpo / plain fine-tune (sft) step tokens/s: " in out
        )


@pytest.mark.slow
def test_bench_train_compares_target_and_all_position_logits(capsys):
    code = main(
        [
            "bench",
            "train",
            "--presets",
            "tiny",
            "--modes",
            "sft",
            "--steps",
            "2",
            "--seq-len",
            "32",
            "--batch",
            "2",
            "--micro",
            "2",
            "--logits",
            "targets",
            "all",
            "--target-fraction",
            "0.1",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "10% of each row" in out
    rows = [line for line in out.splitlines() if "tiny" in line and " sft " in line]
    assert len(rows) == 2 and any(" targets " in r for r in rows) and any(" all " in r for r in rows)
    assert "tiny sft: target-only / all-position logits:" in out and "x peak memory" in out


@pytest.mark.slow
def test_bench_train_compares_shared_and_full_prompts(capsys):
    args = ["bench", "train", "--presets", "tiny", "--modes", "grpo", "--kl-references", "behavior"]
    code = main(
        [*args, "--steps", "2", "--seq-len", "32", "--batch", "4", "--micro", "4", "--prompts", "shared", "full"]
    )
    assert code == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if "tiny" in line and "grpo" in line and "│" in line]
    assert len(rows) == 2 and any("shared prompts" in r for r in rows) and any("full prompts" in r for r in rows)
    assert "tiny grpo, behavior ref (targets logits): shared / full prompts:" in out and "x tokens/s" in out


@pytest.mark.slow
def test_bench_train_compares_activation_checkpointing_on_and_off(capsys):
    args = ["bench", "train", "--presets", "tiny", "--modes", "grpo", "--kl-references", "behavior", "--steps", "2"]
    args += ["--seq-len", "32", "--batch", "4", "--micro", "4", "--prompts", "shared", "--checkpointing", "off", "on"]
    assert main(args) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if "│   tiny" in line or "│ tiny" in line]
    assert len(rows) == 2 and "activation" in out  # the mode column may wrap the label onto a second line
    assert "tiny grpo, behavior ref, shared prompts (targets logits): activation checkpointing on / off: " in out
