"""`bat evaluate run` on scripted agents, then `bat evaluate compare` of the two rounds."""

import json

from bat.cli.main import main


def test_evaluate_run_and_compare(tmp_path, capsys):
    config = tmp_path / "cfg.yaml"
    config.write_text("benchmark:\n  tracks: [classification, detection]\n  repeats: 2\n  runtime: inprocess\n")
    state = str(tmp_path / "run")
    common = ["--config", str(config), "--state", state]
    assert main(["evaluate", "run", *common, "--round", "0", "--agent", "expert"]) == 0
    assert "Overall 100.0" in capsys.readouterr().out
    assert main(["evaluate", "run", *common, "--round", "1", "--agent", "noop"]) == 0
    capsys.readouterr()
    assert main(["evaluate", "compare", *common, "0", "1"]) == 0
    cmp = json.loads(capsys.readouterr().out)
    assert cmp["mean_delta"] < -0.9 and set(cmp["deltas"]) == {"classification", "detection"}
    assert main(["evaluate", "run", *common, "--agent", "expert", "--checkpoint", "x"]) == 2
    assert main(["evaluate", "compare", *common, "0", "5"]) == 2
    assert "rounds with a controller aggregate: [0, 1]" in capsys.readouterr().out


def test_evaluate_run_never_overwrites_a_recorded_evaluation(tmp_path, capsys):
    config = tmp_path / "cfg.yaml"
    config.write_text("benchmark:\n  tracks: [classification]\n  repeats: 1\n  runtime: inprocess\n")
    common = ["--config", str(config), "--state", str(tmp_path / "run")]
    assert main(["evaluate", "run", *common, "--agent", "expert"]) == 0
    capsys.readouterr()
    recorded = {p: p.read_bytes() for p in (tmp_path / "run").rglob("*") if p.is_file()}
    assert main(["evaluate", "run", *common, "--agent", "noop"]) == 2
    out = capsys.readouterr().out
    assert "already has a controller evaluation" in out and "--state DIR" in out and "aggregate_controller.json" in out
    assert {p: p.read_bytes() for p in recorded} == recorded
    assert main(["evaluate", "run", *common, "--round", "1", "--agent", "noop"]) == 0
