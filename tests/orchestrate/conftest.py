"""Make the toy phase module importable here and in job subprocesses (PYTHONPATH is inherited)."""

import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.fixture(autouse=True)
def toy_phases_importable(monkeypatch):
    """Put tests/orchestrate on sys.path and PYTHONPATH so `toy_phases:<phase>` targets resolve in jobs."""
    monkeypatch.syspath_prepend(str(HERE))
    paths = [str(HERE), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(dict.fromkeys(paths)))
    monkeypatch.setenv("BAT_TOY_SLEEP", "0")
    yield
