"""The real pretrained policy (SmolLM2-135M-Instruct): a few SFT steps lower the loss, and the fine-tuned policy
drives a multi-turn rollout in the real bubblewrap sandbox whose calls parse and run."""

from __future__ import annotations

import random
import shutil

import pytest

from bat.config import load_config
from bat.config.deepspeed import DeepSpeedConfig
from bat.config.rollout import RolloutBudgets
from bat.config.sft import SftConfig
from bat.policy.codec import render_tool_call
from bat.policy.loader import load_tokenizer
from bat.rollout.chat import TurnTokens
from bat.rollout.loop import run_rollouts
from bat.rollout.spec import LoopSettings, RolloutSpec
from bat.schemas.bank import ChatMessage, LossMaskSpec, SftRow
from bat.train.sft import train_sft
from bat.train.sft_data import prepare_sft

pytestmark = pytest.mark.slow
FOLDERS = ("task", "inputs", "models", ".")


def listing_rows(count: int, seed: int, split: str) -> list[SftRow]:
    """Rows whose target lists one workspace folder the user names: the call format on short contexts."""
    rng = random.Random(seed)
    rows = []
    for index in range(count):
        folder = rng.choice(FOLDERS)
        messages = [
            ChatMessage(role="system", content="You are a careful agent. Answer with exactly one tool call."),
            ChatMessage(role="user", content=f"Show me what is in the folder `{folder}`."),
        ]
        target = render_tool_call(
            {"name": "list_files", "arguments": {"path": folder}}, thought=f"I will list {folder}."
        )
        rows.append(
            SftRow(
                row_id=f"l{seed}-{index}",
                trajectory_id=f"t{seed}-{index}",
                task_id=f"task{index}",
                track="classification",
                stage="S1",
                outcome="success",
                turn=0,
                messages=messages,
                target=target,
                loss_mask=LossMaskSpec(context_messages=2),
                length=60,
                length_unit="approx_tokens",
                split=split,
            )
        )
    return rows


@pytest.fixture(scope="module")
def tuned(smollm2_dir, tmp_path_factory):
    """SFT of the real policy for 6 steps on call-format rows; returns (summary, export folder)."""
    root = tmp_path_factory.mktemp("smol_sft")
    tokenizer = load_tokenizer(smollm2_dir)
    data = prepare_sft(
        listing_rows(24, 1, "train"), listing_rows(4, 2, "validation"), tokenizer, 512, tools=[], rename=False
    )
    cfg = SftConfig(
        steps=6,
        lr=1e-4,
        warmup_ratio=0.0,
        global_batch=4,
        val_every=6,
        checkpoint_every=6,
        keep_checkpoints=1,
        deepspeed=DeepSpeedConfig(micro_batch_per_rank=4),
    )
    summary = train_sft(
        smollm2_dir,
        data,
        cfg,
        seed=5,
        ckpt_root=root / "ck",
        export_dir=root / "hf",
        metrics_path=root / "metrics.jsonl",
    )
    shutil.rmtree(root / "ck", ignore_errors=True)
    return summary, root / "hf"


def test_a_few_sft_steps_lower_the_loss(tuned):
    summary, export = tuned
    assert summary["done"] and summary["step"] == 6
    assert summary["val_loss"] < 0.5 * summary["first_val_loss"], summary
    assert (export / "config.json").exists() and load_tokenizer(export).pad_token_id == 0


def test_multiturn_rollout_in_the_real_sandbox_parses_calls(tuned, tmp_path):
    from bat.benchmark import StagedEnv, practice_instance, practice_seed
    from bat.rollout.engine_hf import HFEngine

    _, export = tuned
    cfg = load_config(None, ["benchmark.runtime=sandbox", "sandbox.runtime=bwrap"])
    track = "classification"
    env = StagedEnv(
        practice_instance(track, practice_seed(track, 0, cfg), cfg), tmp_path / "ws", tmp_path / "grader", cfg
    )
    env.reset()
    assert (env.workspace / "task" / "README.md").exists()
    messages = [
        {"role": "system", "content": "You are a careful agent. Answer with exactly one tool call."},
        {"role": "user", "content": "Show me what is in the folder `task`."},
    ]
    engine = HFEngine(export)
    tt = TurnTokens(load_tokenizer(export))
    settings = LoopSettings(
        budgets=RolloutBudgets(
            max_assistant_turns=3, max_tool_calls=3, max_new_tokens_per_turn=48, max_context_tokens=4096
        ),
        temperature=0.0,
        no_tool_call="observe",
    )
    spec = RolloutSpec(rollout_id="r0", state_id="s", k=0, seed=3, env=env, messages=messages, workspace=env.workspace)
    try:
        record = run_rollouts(engine, [spec], tt, settings)[0].record
    finally:
        env.close()
        engine.close()
    assert record.valid and len(record.turns) == 3, record.end_reason
    calls = [turn.call for turn in record.turns if turn.call is not None]
    assert calls and all(call["name"] == "list_files" for call in calls), [t.response_text for t in record.turns]
    ran = [turn for turn in record.turns if turn.call is not None and turn.record]
    assert ran and all(turn.observation for turn in ran)
    assert any("README.md" in (turn.observation or "") for turn in ran), [t.observation for t in ran]
    assert tt.decode(record.generated_ids) == "".join(t.response_text for t in record.turns)
