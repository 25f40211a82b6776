"""Session fixtures shared across test packages: the real pretrained policy, converted once per session."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

TOY_DIR = Path(__file__).resolve().parent / "orchestrate"


@pytest.fixture(scope="session")
def tiny_model_builder(tmp_path_factory):
    """`build(cfg: TinyModelConfig, seed) -> Path`: the tiny random-init HF model of that shape and seed, built
    offline once per session and shared by every test that asks for the same one (treat it as read-only)."""
    from bat.policy.tiny import build_tiny_model

    built: dict[tuple[str, int], Path] = {}

    def build(cfg, seed: int) -> Path:
        key = (cfg.model_dump_json(), seed)
        if key not in built:
            built[key] = build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", cfg, seed=seed)
        return built[key]

    return build


@pytest.fixture(scope="session")
def smollm2_dir(tmp_path_factory) -> Path:
    """SmolLM2-135M-Instruct converted from its installed package (`bat model import`) into a session folder."""
    from bat.policy.pretrained import import_pretrained

    return import_pretrained("smollm2-135m-instruct", tmp_path_factory.mktemp("pretrained") / "smollm2")


@pytest.fixture
def toy_phases_env(monkeypatch):
    """Jobs started by a test can import `toy_phases` (the test-only phase functions): tests/orchestrate on their
    PYTHONPATH (local and Slurm jobs inherit the environment); toy phases do not sleep; jobs use this Python."""
    paths = [str(TOY_DIR), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(dict.fromkeys(paths)))
    monkeypatch.setenv("BAT_TOY_SLEEP", "0")
    monkeypatch.setenv("BAT_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def plugin_smoke():
    """`make(executor, name="sqlqa") -> BatConfig`: configs/smoke.yaml on the plug-in benchmark `name` (one practice
    task per track and outcome, one E2E candidate per track, one held-out run per track, the tiny model)."""
    import yaml

    from bat.config import parse_config

    def make(executor: str = "local", name: str = "sqlqa"):
        data = yaml.safe_load((TOY_DIR.parents[1] / "configs" / "smoke.yaml").read_text())
        data["run"]["name"] = f"{name}-smoke"
        data["benchmark"] = {"name": name, "repeats": 1}
        data["bank"] = {"tasks_per_track": 1, "e2e_per_track": 1}
        data["orchestrate"]["executor"] = executor
        return parse_config(data)

    return make
