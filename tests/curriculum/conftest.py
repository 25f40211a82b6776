"""Fixtures of outer-loop tests."""

import pytest
from curriculum_helpers import build_agg


@pytest.fixture
def make_agg():
    return build_agg
