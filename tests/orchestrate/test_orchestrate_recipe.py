"""The Apptainer recipe is linted (spython's parser): the shipped one is clean, and each kind of drift is reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from bat.orchestrate.recipe import lint_recipe

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "containers" / "bat.def"
PYPROJECT = REPO / "pyproject.toml"


def test_shipped_recipe_is_clean() -> None:
    assert lint_recipe(RECIPE, PYPROJECT) == []


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("torch==2.13.0", "torch==2.12.0", "installs torch==2.12.0, pyproject.toml pins torch==2.13.0"),
        ("    run_round.sh /opt/bat/run_round.sh\n", "", "must copy 'run_round.sh'"),
        ("    jobs /opt/bat/jobs\n", "    jobz /opt/bat/jobs\n", "copies 'jobz', which is not in"),
        ("    export HF_HUB_OFFLINE=1\n", "", "must export HF_HUB_OFFLINE=1"),
        ("    export BAT_SGLANG_PYTHON=/opt/venv-sglang/bin/python\n", "", "must export BAT_SGLANG_PYTHON="),
        ('sglang==0.5.23 torch==2.14.1 transformers==5.19.0"', 'sglang==0.5.23"', "engine sglang pins no"),
        (
            "/opt/venv/bin/pip install --no-cache-dir /opt/bat\n",
            '/opt/venv/bin/pip install --no-cache-dir "/opt/bat[vllm]"\n',
            "installs a serving engine into bat's environment",
        ),
        ("%test\n", "%foo\n", "needs a %test section"),
    ],
)
def test_drift_is_reported(tmp_path: Path, old: str, new: str, expected: str) -> None:
    text = RECIPE.read_text()
    assert old in text
    recipe = tmp_path / "containers" / "bat.def"
    recipe.parent.mkdir()
    recipe.write_text(text.replace(old, new))
    problems = lint_recipe(recipe, PYPROJECT, repo=REPO)
    assert any(expected in p for p in problems), problems
