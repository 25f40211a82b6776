"""Shared fixtures: a config that runs tools in-process (fast; isolation is tested with the sandbox runtime)."""

from __future__ import annotations

import pytest

from bat.config.root import BatConfig


@pytest.fixture
def fast_config() -> BatConfig:
    return BatConfig.model_validate({"benchmark": {"runtime": "inprocess", "repeats": 3}})
