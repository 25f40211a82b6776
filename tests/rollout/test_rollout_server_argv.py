"""The command lines bat starts inference servers with (no server is started: no GPU, no vLLM/SGLang needed)."""

from __future__ import annotations

import sys

import pytest

from bat.config.rollout import RolloutConfig, VllmEngineConfig
from bat.rollout.vllm_server import VllmServer


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_vllm_server_gets_parallelism_memory_and_graph_settings_from_config(tmp_path):
    cfg = VllmEngineConfig(python=sys.executable, tensor_parallel_size=2, data_parallel_size=4)
    argv = VllmServer(tmp_path, cfg, max_model_len=8192, dtype="bfloat16").argv()
    assert _flag(argv, "--tensor-parallel-size") == "2" and _flag(argv, "--data-parallel-size") == "4"
    assert _flag(argv, "--gpu-memory-utilization") == "0.85" and _flag(argv, "--dtype") == "bfloat16"
    assert "--no-enforce-eager" in argv and "--enforce-eager" not in argv  # GPU default: CUDA graphs
    assert _flag(argv, "--host") == "127.0.0.1" and _flag(argv, "--model") == str(tmp_path.resolve())
    eager = VllmServer(tmp_path, cfg.model_copy(update={"enforce_eager": True}), max_model_len=512).argv()
    assert "--enforce-eager" in eager


def test_vllm_parallel_settings_are_checked():
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        VllmEngineConfig(tensor_parallel_size=0)
    with pytest.raises(ValueError, match="data_parallel_size=2 needs process=server"):
        RolloutConfig(engine="vllm", vllm=VllmEngineConfig(process="inprocess", data_parallel_size=2))
