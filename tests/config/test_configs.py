"""Every shipped config parses; unknown keys and bad values are refused with messages naming field and value."""

from pathlib import Path

import pytest

from bat.config import ConfigError, config_hash, load_config
from bat.config.run_record import RunConfigMismatch, open_run
from bat.state.layout import RunLayout

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"
EXPERIMENTS = CONFIG_DIR / "experiments"
SHIPPED = sorted(p for p in CONFIG_DIR.rglob("*.yaml") if EXPERIMENTS not in p.parents)
"""Run configs (BatConfig); experiment files under configs/experiments/ are checked by tests/experiment."""


def test_configs_are_shipped() -> None:
    names = {p.name for p in SHIPPED}
    assert {"local.yaml", "smoke.yaml"} <= names
    assert any("cluster" in str(p) for p in SHIPPED)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(CONFIG_DIR)))
def test_every_config_parses(path: Path) -> None:
    cfg = load_config(path)
    assert len(config_hash(cfg)) == 16
    assert abs(sum(cfg.stage_weights.values()) - 1.0) < 1e-9


def test_unknown_key_is_rejected_listing_valid_keys(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("run:\n  seed: 1\n  sead: 2\n")
    with pytest.raises(ConfigError) as info:
        load_config(bad)
    message = str(info.value)
    assert "run.sead: unknown key" in message
    assert "seed" in message and "rounds" in message and str(bad) in message


def test_bad_value_names_field_and_value(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"run\.rounds: Input should be greater than or equal to 0 \(got -3\)"):
        load_config(None, ["run.rounds=-3"])


def test_cross_field_stage_weights_message_names_values() -> None:
    with pytest.raises(ConfigError, match=r"weights must sum to 1.0, got 0.9"):
        load_config(None, ["stages=[{key: S1, name: Plan, weight: 0.4}, {key: S2, name: Setup, weight: 0.5}]"])


def test_override_parsing_and_hash_changes() -> None:
    base = load_config(None)
    changed = load_config(None, ["run.seed=7"])
    assert changed.run.seed == 7
    assert config_hash(base) != config_hash(changed)
    with pytest.raises(ConfigError, match="dotted.key=value"):
        load_config(None, ["run.seed"])


def test_run_json_written_and_mismatch_refused(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path / "run")
    record = open_run(layout, load_config(None))
    assert layout.run_json.exists() and record["config_hash"] == config_hash(load_config(None))
    assert open_run(layout, load_config(None))["config_hash"] == record["config_hash"]
    with pytest.raises(RunConfigMismatch, match="differing sections: run"):
        open_run(layout, load_config(None, ["run.seed=9"]))
    open_run(layout, load_config(None, ["run.seed=9"]), allow_config_change=True)
    assert (layout.root / f"run.{record['config_hash']}.json").exists()


def test_executor_change_keeps_hash_and_run(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path / "run")
    local = load_config(None, ["orchestrate.executor=local"])
    slurm = load_config(None, ["orchestrate.executor=slurm"])
    assert config_hash(local) == config_hash(slurm)
    open_run(layout, local)
    assert open_run(layout, slurm)["config"]["orchestrate"]["executor"] == "slurm"


def test_empty_and_non_utf8_config_files_are_errors(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing but a comment\n")
    with pytest.raises(ConfigError, match="empty.yaml: the config file is empty"):
        load_config(empty)
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"run:\n  name: caf\xe9\n")
    with pytest.raises(ConfigError, match="latin.yaml: not UTF-8 text"):
        load_config(latin)


def test_changed_config_on_a_finished_run_is_refused(tmp_path: Path, monkeypatch, capsys) -> None:
    from bat.orchestrate import driver

    layout = RunLayout(tmp_path / "run")
    open_run(layout, load_config(None))
    before = layout.run_json.read_bytes()
    monkeypatch.setattr(driver, "next_round", lambda config, layout: None)  # every round finished
    assert driver.run(load_config(None), layout) == 0
    assert "nothing to do" in capsys.readouterr().out
    with pytest.raises(RunConfigMismatch, match="differing sections: grpo"):
        driver.run(load_config(None, ["grpo.lr=0.001"]), layout)
    assert layout.run_json.read_bytes() == before
