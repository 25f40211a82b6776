"""An experiment's committed held-out secret: installed into its state, refused when missing, never mounted in a
sandbox."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bat.benchmark.secret import HeldoutSecret, read_secret
from bat.experiment.share import experiment_secret
from bat.experiment.spec import ExperimentError, load_experiment

REPO = Path(__file__).resolve().parents[2]


def _spec(tmp_path: Path, secret: Path) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(
        f"name: t\nbase_config: {REPO / 'configs' / 'smoke.yaml'}\nseeds: [1]\nstate_dir: {tmp_path / 'state'}\n"
        f"secret_file: {secret}\narms:\n  - {{name: a}}\n"
    )
    return path


def test_the_committed_secret_is_the_experiments_suite(tmp_path):
    secret = HeldoutSecret.from_text("experiment")
    committed = tmp_path / "heldout.secret"
    committed.write_text(secret.key + "\n")
    spec = load_experiment(_spec(tmp_path, committed))
    assert read_secret(experiment_secret(spec)) == secret


def test_a_missing_secret_file_is_refused_naming_it(tmp_path):
    with pytest.raises(ExperimentError, match="secret_file .*does not exist"):
        load_experiment(_spec(tmp_path, tmp_path / "gone.secret"))


def test_sandboxes_never_mount_the_committed_secret():
    from bat.sandbox.runtimes import python_env

    env = python_env(sys.executable, ())
    committed = str((REPO / "docs" / "results" / "rl_teaches" / "heldout.secret").resolve())
    assert not any(committed == r or committed.startswith(r.rstrip("/") + "/") for r in env.roots), env.roots
