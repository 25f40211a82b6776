"""`bat run`, `bat status`, `jobs/<phase>.py`, `jobs/launch.py` and `./run_round.sh` (debug executor: in-process)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import toy_phases
import yaml

from bat.cli.main import main
from bat.config import resolved_dict
from bat.orchestrate.entry import launch_main

REPO = Path(__file__).resolve().parents[2]


def _toy_yaml(tmp_path, executor="debug", rounds=1, extra=None):
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(resolved_dict(toy_phases.toy_config(executor, rounds=rounds, extra=extra))))
    return path


def test_final_test_runs_once_after_the_last_route(tmp_path, capsys):
    cfg = _toy_yaml(tmp_path, extra=["evaluate.test_split=true"])
    state = tmp_path / "state"
    assert main(["run", "--config", str(cfg), "--state", str(state)]) == 0
    assert (state / "round_01" / "final_test" / "DONE.json").exists()
    assert not (state / "round_00" / "final_test").exists()
    capsys.readouterr()
    assert main(["status", "--state", str(state), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["rounds"][1]["phases"]["final_test"]["status"] == "done"
    assert main(["run", "--config", str(cfg), "--state", str(state)]) == 0  # finished: nothing to do
    assert "nothing to do" in capsys.readouterr().out


def test_bat_run_then_status_json(tmp_path, capsys):
    cfg = _toy_yaml(tmp_path)
    state = tmp_path / "state"
    assert main(["run", "--config", str(cfg), "--state", str(state)]) == 0
    capsys.readouterr()
    assert main(["status", "--state", str(state), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["round_budget"] == 1 and [r["round"] for r in data["rounds"]] == [0, 1]
    assert {p: c["status"] for p, c in data["rounds"][0]["phases"].items()} == dict.fromkeys(
        ("synthesize", "scan", "sft", "evaluate", "route"), "done"
    )
    assert set(data["rounds"][1]["phases"]) == {"rollout", "verify", "grpo", "evaluate", "route"}
    assert data["rounds"][1]["phases"]["grpo"]["counts"] == {"rows": 12.0}
    assert main(["status", "--state", str(state)]) == 0
    table = capsys.readouterr().out
    assert "synthesize" in table and table.count("done") == 10


def test_status_shows_partial_pending_and_scores(tmp_path, capsys):
    from bat.state.atomic import atomic_write_json
    from bat.state.layout import RunLayout

    layout = RunLayout(tmp_path / "state")
    (layout.phase_dir(0, "synthesize")).mkdir(parents=True)
    (layout.phase_dir(0, "synthesize") / "shard_000.jsonl").write_text("{}\n")
    atomic_write_json(
        layout.phase_dir(0, "evaluate") / "aggregate_controller.json",
        {"stages": {"S1": 0.5, "S2": None}, "task": 0.2, "agentic": 0.4, "overall": 0.3, "routable": False},
    )
    assert main(["status", "--state", str(layout.root), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    phases = data["rounds"][0]["phases"]
    assert phases["synthesize"]["status"] == "partial" and phases["scan"]["status"] == "pending"
    assert data["rounds"][0]["scores"]["overall"] == 0.3
    assert main(["status", "--state", str(layout.root)]) == 0
    out = capsys.readouterr().out
    assert "30.0" in out and "S1=50.0" in out and "S2=null" in out
    assert main(["status", "--state", str(tmp_path / "missing")]) == 2


def test_bat_run_refuses_bad_config_with_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("orchestrate: {executor: kubernetes}\n")
    assert main(["run", "--config", str(bad), "--state", str(tmp_path / "s")]) == 2
    assert "orchestrate.executor" in capsys.readouterr().err
    cfg = _toy_yaml(tmp_path)
    code = main(
        [
            "run",
            "--config",
            str(cfg),
            "--state",
            str(tmp_path / "s"),
            "--set",
            "orchestrate.phase_overrides.sft=no_such_module_xyz:sft",
        ]
    )
    assert code == 2 and "refusing to queue round 0" in capsys.readouterr().err
    assert not (tmp_path / "s" / "jobs").exists()


def test_launch_checks_the_run_round_phase_list(tmp_path, capsys):
    cfg = _toy_yaml(tmp_path, rounds=0)
    wrong = "synthesize scan sft verify rollout grpo evaluate route"
    assert launch_main(["--config", str(cfg), "--state", str(tmp_path / "s"), "--phases", wrong]) == 2
    assert "data-flow order is ['synthesize', 'scan', 'sft', 'rollout'" in capsys.readouterr().err


def test_run_round_sh_and_phase_job_entry_points(tmp_path):
    cfg = _toy_yaml(tmp_path, rounds=0)
    state = tmp_path / "state"
    env = {**os.environ, "BAT_CONFIG": str(cfg), "BAT_STATE": str(state), "BAT_PYTHON": sys.executable}
    out = subprocess.run(["./run_round.sh"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "round 0 finished (debug executor)" in out.stdout
    assert len(toy_phases.output_digests(state)) == 5
    # a thin job entry point: DONE phase is a no-op, a missing one runs in-process
    job = [
        sys.executable,
        str(REPO / "jobs" / "rollout.py"),
        "--config",
        str(cfg),
        "--state",
        str(state),
        "--round",
        "1",
    ]
    first = subprocess.run(job, env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0 and "DONE {'rows': 12}" in first.stdout, first.stderr
    again = subprocess.run(job, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "already DONE" in again.stdout
    for path in (REPO / "jobs").glob("*.py"):
        text = path.read_text()
        assert len(text.splitlines()) < 60 and "Reads:" in text and "Launch:" in text, path.name
