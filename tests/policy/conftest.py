"""Fixtures: one small tiny model per test session (built offline, deterministic)."""

from __future__ import annotations

import pytest

from bat.config.model import TinyModelConfig

SMALL = TinyModelConfig(
    vocab_size=512, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=128, max_positions=512
)


@pytest.fixture(scope="session")
def tiny_dir(tiny_model_builder):
    return tiny_model_builder(SMALL, 7)


@pytest.fixture(scope="session")
def small_cfg():
    return SMALL
