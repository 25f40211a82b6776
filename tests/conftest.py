"""Session fixtures shared across test packages: the real pretrained policy, converted once per session."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def smollm2_dir(tmp_path_factory) -> Path:
    """SmolLM2-135M-Instruct converted from its installed package (`bat model import`) into a session folder."""
    from bat.policy.pretrained import import_pretrained

    return import_pretrained("smollm2-135m-instruct", tmp_path_factory.mktemp("pretrained") / "smollm2")
