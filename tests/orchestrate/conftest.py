"""The toy phases (`toy_phases`, importable through pytest's `pythonpath`) reach every job these tests start."""

import pytest


@pytest.fixture(autouse=True)
def _toy_phases_in_jobs(toy_phases_env):
    """Every test here may queue toy phases: the shared `toy_phases_env` fixture (tests/conftest.py)."""
