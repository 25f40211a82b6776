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


def test_evaluate_explain_prints_the_breakdown_and_one_transcript(tmp_path, capsys):
    config = tmp_path / "cfg.yaml"
    config.write_text("benchmark:\n  tracks: [classification, vqa]\n  repeats: 1\n  runtime: inprocess\n")
    state = tmp_path / "run"
    common = ["--config", str(config), "--state", str(state)]
    assert main(["evaluate", "run", *common, "--agent", "skip-validate"]) == 0
    capsys.readouterr()
    evaluate_dir = state / "round_00" / "evaluate"
    aggregate = json.loads((evaluate_dir / "aggregate_controller.json").read_text())
    assert aggregate["failures"]["stalled"] == {"S3": 2}  # skipping the pilot never completes a Validate call
    assert aggregate["failures"]["first_failures"] == {"too_early": 2}
    assert main(["evaluate", "explain", str(evaluate_dir)]) == 0
    out = capsys.readouterr().out
    assert "| too_early | 4 | " in out and " % | 2 | 2 |" in out and "| S3 | 2 |" in out
    held = state / "heldout" / "round_00" / "controller"
    assert main(["evaluate", "explain", str(held)]) == 0
    assert "| controller-vqa-r00 | vqa | done | S3 |" in capsys.readouterr().out
    assert main(["evaluate", "explain", str(evaluate_dir), "--run", "controller-vqa-r00"]) == 0
    out = capsys.readouterr().out
    assert "# Run controller-vqa-r00 (vqa)" in out and "too_early (S4 after S2)" in out and '"run_model"' in out
    assert main(["evaluate", "explain", str(evaluate_dir), "--run", "nope"]) == 2
    assert "no transcript of run 'nope'" in capsys.readouterr().out
    assert main(["evaluate", "explain", str(tmp_path)]) == 2
    assert "not an evaluation folder" in capsys.readouterr().out
