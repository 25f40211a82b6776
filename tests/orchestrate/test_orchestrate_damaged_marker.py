"""A finished run whose phase marker is damaged (torn, not JSON, not a DONE record): `bat run` and `bat status` exit 2
naming the marker and what to do, never "nothing to do" and never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bat.cli.main import main
from bat.config.load import load_config
from bat.orchestrate.graph import round_phases
from bat.state.layout import RunLayout
from bat.state.markers import write_done

CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "smoke.yaml")

DAMAGE = {
    "truncated": lambda text: text[: len(text) // 3],
    "not_json": lambda text: "DONE\n",
    "not_a_record": lambda text: json.dumps({"phase": "sft"}),
}


def _finished_bootstrap(root: Path) -> RunLayout:
    """Round 0 with every phase marked DONE and a route decision that ends the run (run.rounds=0)."""
    layout = RunLayout(root)
    for phase in round_phases(0, load_config(CONFIG, ["run.rounds=0"])):
        directory = layout.phase_dir(0, phase)
        directory.mkdir(parents=True)
        write_done(directory, phase=phase, config_hash="0" * 16, round_index=0)
    layout.round(0).decision.write_text(json.dumps({"next_round": None}))
    return layout


def test_a_finished_run_reads_as_finished(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    _finished_bootstrap(tmp_path / "run")
    assert main(["run", "--config", CONFIG, "--state", str(tmp_path / "run"), "--rounds", "0"]) == 0
    assert "nothing to do" in capsys.readouterr().out


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("command", ["run", "status"])
def test_a_damaged_marker_is_named_with_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str, command: str
):
    layout = _finished_bootstrap(tmp_path / "run")
    marker = layout.done_marker(0, "sft")
    marker.write_text(DAMAGE[damage](marker.read_text()))
    argv = ["status", "--state", str(layout.root)]
    if command == "run":
        argv = ["run", "--config", CONFIG, "--state", str(layout.root), "--rounds", "0"]
    assert main(argv) == 2
    out = capsys.readouterr()
    assert str(marker) in out.err
    assert "rerun the same command" in out.err
    assert "nothing to do" not in out.out + out.err
    assert "Traceback" not in out.out + out.err
