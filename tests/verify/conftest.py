"""Fixtures for rollout tests: a tiny real HF policy built offline (random init, CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bat.config.model import TinyModelConfig

TINY = TinyModelConfig(
    vocab_size=512, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=128, max_positions=4096
)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    from bat.policy.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", TINY, seed=0)


@pytest.fixture(scope="session")
def tokenizer(tiny_model):
    from bat.policy.loader import load_tokenizer

    return load_tokenizer(tiny_model)
