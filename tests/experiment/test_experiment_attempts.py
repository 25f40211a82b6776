"""An attempt stopped from outside (no arm record written) is still counted: its wall runs from the start its
`experiment_attempt.json` recorded to the newest file it wrote, plus the stopped attempts that file carries."""

from __future__ import annotations

import json
import os
from pathlib import Path

from bat.experiment.execute import stopped_attempts
from bat.state.experiment_layout import ATTEMPT_NAME

STARTED = 1_700_000_000.0


def _touch(path, when: float, text: str = "x") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (when, when))


def test_no_open_attempt_counts_nothing(tmp_path):
    _touch(tmp_path / "round_01" / "rollouts.jsonl", STARTED)
    assert stopped_attempts(tmp_path) == (0, 0.0)


def test_stopped_attempt_wall_reads_newest_file(tmp_path):
    _touch(tmp_path / ATTEMPT_NAME, STARTED + 9_999, json.dumps({"started_at": STARTED}))  # marker's own time: ignored
    _touch(tmp_path / "round_02" / "grpo" / "a.jsonl", STARTED + 120.0)
    _touch(tmp_path / "round_02" / "grpo" / "b.json", STARTED + 1_830.5)
    _touch(tmp_path / "seeded_from_bootstrap.bin", STARTED - 500)  # older than the attempt: contributes nothing
    assert stopped_attempts(tmp_path) == (1, 1_830.5)


def test_stopped_before_writing_anything_is_zero_wall(tmp_path):
    _touch(tmp_path / ATTEMPT_NAME, STARTED, json.dumps({"started_at": STARTED}))
    _touch(tmp_path / "round_01" / "old.jsonl", STARTED - 60)  # an earlier attempt's file
    assert stopped_attempts(tmp_path) == (1, 0.0)


def test_earlier_stopped_attempts_are_carried(tmp_path):
    attempt = {"started_at": STARTED, "stopped_attempts": 2, "stopped_wall_s": 4_000.25}
    _touch(tmp_path / ATTEMPT_NAME, STARTED, json.dumps(attempt))
    _touch(tmp_path / "round_03" / "grpo" / "c.json", STARTED + 100)
    assert stopped_attempts(tmp_path) == (3, 4_100.25)


def test_an_open_attempt_reads_as_unfinished_and_the_cli_says_how_to_resume(tmp_path, capsys):
    import argparse
    from types import SimpleNamespace

    from bat.cli.experiment import _report
    from bat.experiment.collect import seed_result
    from bat.experiment.share import arm_dir
    from bat.experiment.spec import load_experiment
    from bat.schemas.experiment_results import ArmResult, ExperimentResults

    smoke = Path(__file__).resolve().parents[2] / "configs" / "smoke.yaml"
    (tmp_path / "exp.yaml").write_text(
        f"name: t\nbase_config: {smoke}\nseeds: [1]\nstate_dir: {tmp_path / 'state'}\nout_dir: {tmp_path / 'out'}\n"
        "arms:\n  - {name: grpo, overrides: [curriculum.arm=grpo]}\n"
    )
    spec = load_experiment(tmp_path / "exp.yaml")
    assert seed_result(spec, "grpo", 1).status == "not run"
    root = arm_dir(spec, 1, "grpo")
    root.mkdir(parents=True)
    _touch(root / ATTEMPT_NAME, STARTED, json.dumps({"started_at": STARTED}))
    run = seed_result(spec, "grpo", 1)
    assert (run.status, run.attempt_started_at) == ("unfinished", "2023-11-14T22:13:20+00:00")

    results = ExperimentResults(arms={"grpo": ArmResult(kind="trained", seeds=[run])})
    args = argparse.Namespace(out=str(tmp_path / "out"))
    assert _report(args, spec, [SimpleNamespace(name="grpo")], [1], results) == 1
    line = capsys.readouterr().out.splitlines()[-1]
    assert line.startswith("bat experiment: arm grpo seed 1: unfinished (an attempt started 2023-11-14T22:13:20+00:00")
    assert "the same command resumes it" in line
