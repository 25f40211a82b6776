"""The `sglang` engine end to end against the SGLang stand-in (tests/fake_sglang.py, the real tiny checkpoint behind
SGLang's native API in a process bat starts): command line, ids and behavior log-probs against transformers' scoring,
the probe accepting the served checkpoint and refusing other weights, reload to a new checkpoint, stop."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from bat.config.rollout import RolloutBudgets, RolloutConfig, SglangEngineConfig
from bat.rollout.engine import GenRequest
from bat.rollout.engines import make_engine
from bat.rollout.probe import ServedModelMismatch, local_logprobs
from bat.rollout.sglang_server import SglangServer, SglangServerError, sglang_python

FAKE = str(Path(__file__).resolve().parents[1] / "fake_sglang.py")


def _config(**sglang) -> RolloutConfig:
    settings = {"python": sys.executable, "launcher": FAKE, "start_timeout_s": 120, **sglang}
    return RolloutConfig(
        engine="sglang", sglang=SglangEngineConfig(**settings), budgets=RolloutBudgets(max_context_tokens=1024)
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_command_line_from_config(tmp_path):
    cfg = SglangEngineConfig(
        python=sys.executable, tensor_parallel_size=2, data_parallel_size=4, extra_args=["--attention-backend", "x"]
    )
    server = SglangServer(tmp_path, cfg, context_length=8192, dtype="bfloat16")
    server.port = 31234
    argv = server.argv()
    assert argv[:3] == [sys.executable, "-m", "sglang.launch_server"]

    def flag(name: str) -> str:
        return argv[argv.index(name) + 1]

    assert flag("--model-path") == str(tmp_path.resolve()) and flag("--tp") == "2" and flag("--dp") == "4"
    assert flag("--port") == "31234" and flag("--host") == "127.0.0.1" and flag("--mem-fraction-static") == "0.85"
    assert flag("--dtype") == "bfloat16" and flag("--context-length") == "8192"
    assert argv[-2:] == ["--attention-backend", "x"]
    script = SglangServer(tmp_path, cfg.model_copy(update={"launcher": FAKE}), context_length=512, dtype="float32")
    assert script.argv()[:2] == [sys.executable, FAKE]


def test_no_sglang_interpreter_is_named(monkeypatch, tmp_path):
    monkeypatch.delenv("BAT_SGLANG_PYTHON", raising=False)
    with pytest.raises(SglangServerError, match=r"rollout.sglang.python = .*: no such interpreter"):
        sglang_python(str(tmp_path / "nope"))
    with pytest.raises(SglangServerError, match="BAT_SGLANG_PYTHON"):
        sglang_python(None)  # this venv has no sglang


def test_engine_generates_ids_and_logprobs_of_the_served_checkpoint(
    tiny_model, other_tiny_model, tmp_path, monkeypatch
):
    argv_file = tmp_path / "argv.json"
    monkeypatch.setenv("FAKE_SGLANG_ARGV", str(argv_file))
    engine = make_engine(_config(tensor_parallel_size=2), tiny_model)
    try:
        assert engine.probe_diff is not None and engine.probe_diff < 2e-3
        sent = json.loads(argv_file.read_text())
        assert sent[sent.index("--tp") + 1] == "2" and sent[sent.index("--model-path") + 1] == str(tiny_model)
        reqs = [
            GenRequest(prompt_ids=list(range(10, 20 + i)), max_new_tokens=6, seed=i, temperature=1.0) for i in range(3)
        ]
        got = engine.generate(reqs)
        for req, res in zip(reqs, got):
            assert res.error is None and len(res.token_ids) == 6
            ref = local_logprobs(tiny_model, req.prompt_ids, res.token_ids)
            assert res.logprobs == pytest.approx(ref, abs=2e-3)
        pid = engine.server.proc.pid
        engine.set_weights(other_tiny_model)  # reloaded in place, flushed, probed
        assert engine.server.proc.pid == pid and engine.checkpoint == str(other_tiny_model)
        assert engine.server.served_path() == str(other_tiny_model)
        res = engine.generate(reqs[:1])[0]
        ref = local_logprobs(other_tiny_model, reqs[0].prompt_ids, res.token_ids)
        assert res.logprobs == pytest.approx(ref, abs=2e-3)
    finally:
        engine.close()
    assert engine.server is None and not _alive(pid)


def test_probe_refuses_a_server_on_other_weights(tiny_model, other_tiny_model):
    cfg = _config(extra_args=["--fake-weights", str(other_tiny_model)])  # claims tiny_model, serves other weights
    with pytest.raises(ServedModelMismatch, match=f"does not serve the checkpoint {tiny_model}"):
        make_engine(cfg, tiny_model)


def test_a_server_that_dies_at_start_is_reported_with_its_log(tiny_model, tmp_path):
    crash = tmp_path / "crash.py"
    crash.write_text("import sys\nprint('no GPU found')\nsys.exit(3)\n")
    with pytest.raises(SglangServerError, match=r"exited with code 3[\s\S]*no GPU found"):
        make_engine(_config(launcher=str(crash)), tiny_model)


def test_a_refused_reload_starts_a_new_server(tiny_model, other_tiny_model, monkeypatch):
    engine = make_engine(_config(verify_checkpoint=False), tiny_model)
    try:
        old = engine.server.proc.pid

        def refuse(self, checkpoint):
            raise SglangServerError("cannot load: other architecture")

        monkeypatch.setattr(SglangServer, "reload", refuse)
        engine.set_weights(other_tiny_model)
        assert engine.server.proc.pid != old and not _alive(old)
        assert engine.server.served_path() == str(other_tiny_model) and engine.checkpoint == str(other_tiny_model)
    finally:
        engine.close()
