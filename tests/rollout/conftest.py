"""Fixtures for rollout tests: a tiny real HF policy built offline (random init, CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bat.config.model import TinyModelConfig

TINY = TinyModelConfig(
    vocab_size=512, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=128, max_positions=4096
)


@pytest.fixture(scope="session")
def tiny_model(tiny_model_builder) -> Path:
    return tiny_model_builder(TINY, 0)


@pytest.fixture(scope="session")
def other_tiny_model(tiny_model_builder) -> Path:
    """The same shape with other weights (seed 7): a checkpoint a server is not serving."""
    return tiny_model_builder(TINY, 7)


@pytest.fixture(scope="session")
def tokenizer(tiny_model):
    from bat.policy.loader import load_tokenizer

    return load_tokenizer(tiny_model)
