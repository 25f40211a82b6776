"""The null control: the SFT moved along a seeded random direction, calibrated to a KL from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bat.cli.main import main
from bat.config.model import TinyModelConfig
from bat.experiment.null_control import FIRST_SCALE, NullControlError, calibrate, next_scale, write_perturbed
from bat.schemas.experiment import ScaleTry
from bat.state.experiment_layout import ExperimentRunFiles

REPO = Path(__file__).resolve().parents[2]
TINY = TinyModelConfig(
    vocab_size=512, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=128, max_positions=512
)


def _weights(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(path / "model.safetensors")


def test_next_scale_rescales_the_last_measure_by_the_root_of_the_kl_ratio() -> None:
    assert next_scale([], 0.02) == FIRST_SCALE
    assert next_scale([ScaleTry(scale=0.01, kl=0.005)], 0.02) == pytest.approx(0.02)  # KL ~ scale^2
    assert next_scale([ScaleTry(scale=0.01, kl=0.0)], 0.02) == pytest.approx(0.1)


def test_perturbation_is_seeded_and_relative_to_each_tensor(tiny_model_builder, tmp_path: Path) -> None:
    start = tiny_model_builder(TINY, 0)
    a = write_perturbed(start, tmp_path / "a", 0.1, seed=1)
    again = write_perturbed(start, tmp_path / "again", 0.1, seed=1)
    other = write_perturbed(start, tmp_path / "other", 0.1, seed=2)
    base, wa, wagain, wother = (_weights(p) for p in (start, a, again, other))
    assert all(wa[k].equal(wagain[k]) for k in wa)  # the same seed writes the same weights
    assert any(not wa[k].equal(wother[k]) for k in wa)
    for key, theta in base.items():
        if theta.numel() >= 4096:  # the change's RMS is 0.1 of the tensor's (up to sampling)
            ratio = (wa[key] - theta).pow(2).mean().sqrt() / theta.pow(2).mean().sqrt()
            assert ratio == pytest.approx(0.1, rel=0.1), key
    assert {p.name for p in start.iterdir()} <= {p.name for p in a.iterdir()}  # tokenizer and template travel


def test_calibration_reaches_the_target_kl_and_resumes(tiny_model_builder, tmp_path: Path, monkeypatch) -> None:
    start = tiny_model_builder(TINY, 0)
    prompts = [[{"role": "user", "content": f"Prompt number {i}."}] for i in range(3)]
    kl_args = {"max_new_tokens": 8, "seed": 0, "tools": []}
    files = ExperimentRunFiles(tmp_path / "null_seed")
    record = calibrate(start, files, prompts, 0.05, 1, kl_args)
    assert record.kl is not None and record.checkpoint is not None
    assert abs(record.kl - 0.05) <= 0.25 * 0.05 and Path(record.checkpoint).is_dir()
    assert record.tried[-1] == ScaleTry(scale=record.scale, kl=record.kl)
    assert files.null_calibration.is_file() and Path(record.checkpoint).parent == files.null_work
    assert [p.name for p in files.null_work.glob("scale_*")] == [Path(record.checkpoint).name]

    import bat.train.kl_estimate as kl_estimate

    monkeypatch.setattr(kl_estimate, "estimate_kl", lambda *a, **k: pytest.fail("a calibrated seed is measured again"))
    assert calibrate(start, files, prompts, 0.05, 1, kl_args) == record
    with pytest.raises(NullControlError, match="calibrated to KL 0.05, not 0.1"):
        calibrate(start, files, prompts, 0.1, 1, kl_args)
    with pytest.raises(NullControlError, match="no scale within"):
        monkeypatch.setattr(kl_estimate, "estimate_kl", lambda *a, **k: 0.0)
        calibrate(start, ExperimentRunFiles(tmp_path / "never"), prompts, 0.05, 1, kl_args)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--null-control", "1"], "--null-control SEEDS and --null-kl KL go together"),
        (["--null-kl", "0.02"], "--null-control SEEDS and --null-kl KL go together"),
        (["--null-control", "1", "--null-kl", "0.02", "--only", "bicurl"], "it goes without --only"),
    ],
)
def test_null_control_flags_are_checked_before_anything_runs(tmp_path: Path, capsys, extra, message) -> None:
    exp = tmp_path / "exp.yaml"
    exp.write_text(
        f"name: t\nbase_config: {REPO / 'configs' / 'smoke.yaml'}\nseeds: [1]\nwide_final_repeats: 3\n"
        f"state_dir: {tmp_path / 'state'}\nout_dir: {tmp_path / 'out'}\n"
        "arms:\n  - {name: bicurl, overrides: [curriculum.arm=bicurl]}\n"
    )
    assert main(["experiment", "--config", str(exp), *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "state").exists()


def test_null_control_needs_a_widened_experiment(tmp_path: Path, capsys) -> None:
    exp = tmp_path / "exp.yaml"
    exp.write_text(
        f"name: t\nbase_config: {REPO / 'configs' / 'smoke.yaml'}\nseeds: [1]\nstate_dir: {tmp_path / 'state'}\n"
        "arms:\n  - {name: bicurl, overrides: [curriculum.arm=bicurl]}\n"
    )
    assert main(["experiment", "--config", str(exp), "--null-control", "1", "--null-kl", "0.02"]) == 2
    assert "set wide_final_repeats" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:  # argparse refuses the value itself
        main(["experiment", "--config", str(exp), "--null-control", "1", "--null-kl", "-1"])
    assert exited.value.code == 2 and "takes a KL above 0" in capsys.readouterr().err
