"""A training phase attempting to open held-out files fails loudly; evaluation phases may read them."""

import os

import pytest

from bat.config.root import BatConfig
from bat.phase.context import PhaseContext
from bat.phase.guard import HeldoutAccessError, guard_phase, heldout_guard
from bat.state.layout import RunLayout


@pytest.fixture
def layout(tmp_path):
    lay = RunLayout(tmp_path / "run").ensure()
    (lay.heldout_dir / "round_01").mkdir(parents=True)
    (lay.heldout_dir / "round_01" / "runs.jsonl").write_text("{}\n")
    (lay.root / "bank").mkdir(exist_ok=True)
    (lay.root / "bank" / "ok.txt").write_text("fine")
    return lay


def test_open_under_heldout_raises_in_training_phase(layout):
    secret = layout.heldout_dir / "round_01" / "runs.jsonl"
    with pytest.raises(HeldoutAccessError, match="grpo"), heldout_guard(layout, "grpo"):
        assert (layout.root / "bank" / "ok.txt").read_text() == "fine"  # training side is fine
        open(secret).read()
    with pytest.raises(HeldoutAccessError), heldout_guard(layout, "rollout"):
        os.listdir(layout.heldout_dir)
    # outside any guard the file is readable again (the hook is inert)
    assert secret.read_text() == "{}\n"


def test_swallowed_violation_still_fails_at_exit(layout):
    with pytest.raises(HeldoutAccessError, match="1 held-out access"), heldout_guard(layout, "sft"):
        try:
            open(layout.heldout_dir / "round_01" / "runs.jsonl")
        except Exception:  # a careless phase swallowing errors
            pass


def test_relative_and_symlinked_paths_are_caught(layout, tmp_path, monkeypatch):
    link = tmp_path / "innocent"
    link.symlink_to(layout.heldout_dir / "round_01")
    monkeypatch.chdir(layout.root)
    with pytest.raises(HeldoutAccessError), heldout_guard(layout, "verify"):
        open(link / "runs.jsonl")
    with pytest.raises(HeldoutAccessError), heldout_guard(layout, "verify"):
        open("heldout/round_01/runs.jsonl")


def test_guard_phase_lets_evaluation_read(layout):
    cfg = BatConfig()
    secret = layout.heldout_dir / "round_01" / "runs.jsonl"
    with guard_phase(PhaseContext(config=cfg, layout=layout, round=1, phase="evaluate")):
        assert secret.read_text() == "{}\n"
    with pytest.raises(HeldoutAccessError, match="route"):
        with guard_phase(PhaseContext(config=cfg, layout=layout, round=1, phase="route")):
            secret.read_text()
