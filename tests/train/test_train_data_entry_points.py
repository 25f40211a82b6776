"""`bat train sft|grpo` and the sft/grpo phases train on the same data for the same config: both go through
`bat.train.sft_data.sft_data` / `bat.train.grpo_data.grpo_data`. The trainer is stopped at its call and the data it
was handed compared, row for row."""

from __future__ import annotations

from pathlib import Path

import pytest

from bat.cli.main import main
from bat.config import load_config
from bat.phase.context import PhaseContext
from bat.state.layout import RunLayout
from bat.state.train_layout import TrainOutLayout
from bat.train.phase import run_sft


class _Handed(Exception):
    """Raised by the stand-in trainer with the data it was handed."""

    def __init__(self, data):
        super().__init__("trainer reached")
        self.data = data


def _stop_at_trainer(*args, **kwargs):
    raise _Handed(args[1])


def _rows(data) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    return [(tuple(e.ids), tuple(e.mask)) for e in data]


@pytest.fixture
def practice_run(tmp_path: Path, tiny_dir) -> tuple[RunLayout, list[str]]:
    """A run dir holding a synthesized practice bank (two tasks, with a validation split) and the overrides that
    name it and the tiny model."""
    from bat.bank.synthesize import synthesize
    from bat.leakage.preflight import scan_and_admit

    overrides = [
        "bank.tracks=[classification]",
        "bank.tasks_per_track=2",
        "bank.e2e_per_track=0",
        "bank.outcomes=[success]",
        "bank.validation_fraction=0.5",
        "benchmark.runtime=inprocess",
        "leakage.enabled=false",
        "bank.sft_max_length=100000",
        "sft.max_seq_len=100000",
        f"model.path={tiny_dir}",
    ]
    layout = RunLayout(tmp_path / "run")
    cfg = load_config(None, overrides)
    bank, _ = synthesize(cfg, layout)
    scan_and_admit(layout, bank.version, cfg)  # leakage off: admitted unscanned, as the scan phase does
    return layout, overrides


@pytest.mark.parametrize("flip", [[], ["sft.rename_identifiers=false", "sft.pack_prefixes=false"]])
def test_bat_train_sft_hands_the_trainer_the_phase_rows(practice_run, tiny_dir, tmp_path, monkeypatch, flip):
    import bat.train.sft

    layout, overrides = practice_run
    overrides = overrides + flip
    cfg = load_config(None, overrides)
    monkeypatch.setattr(bat.train.sft, "train_sft", _stop_at_trainer)
    with pytest.raises(_Handed) as phase:
        run_sft(PhaseContext(config=cfg, layout=layout, round=0, phase="sft"))
    bank = layout.bank_version(layout.complete_bank_versions()[-1])
    argv = ["train", "sft", "--train", str(bank.sft_split("train")), "--val", str(bank.sft_split("validation"))]
    argv += ["--model", str(tiny_dir), "--out", str(tmp_path / "out")]
    with pytest.raises(_Handed) as cli:
        main(argv + [arg for override in overrides for arg in ("--set", override)])
    phase_data, cli_data = phase.value.data, cli.value.data
    assert phase_data.train and phase_data.val
    assert _rows(cli_data.train) == _rows(phase_data.train)
    assert _rows(cli_data.val) == _rows(phase_data.val)
    assert cli_data.counts == phase_data.counts
    assert cli_data.rename is phase_data.rename is cfg.sft.rename_identifiers
    assert cli_data.tools == phase_data.tools
    if cfg.sft.rename_identifiers:  # a visit renames the same way on both sides
        assert _rows(cli_data.validation(7)) == _rows(phase_data.validation(7))


def test_train_out_layout_names_the_files_bat_train_writes(tmp_path: Path):
    out = TrainOutLayout(tmp_path / "out")
    assert out.checkpoints == tmp_path / "out" / "checkpoints"
    assert out.export == tmp_path / "out" / "export"
    assert out.metrics.parent == out.summary.parent == out.root
    assert {out.metrics.name, out.summary.name} == {"metrics.jsonl", "summary.json"}


def _grpo_rows(data) -> list[tuple]:
    return [(i.rollout_id, tuple(i.ids), tuple(i.mask), i.adv) for i in data.items]


@pytest.mark.parametrize(("credit", "twin"), [("own-stage", False), ("all-turns", False), ("own-stage", True)])
def test_bat_train_grpo_hands_the_trainer_the_phase_items(
    tmp_path, tiny_dir, grpo_records, make_grpo_plan, monkeypatch, credit, twin
):
    import bat.train.grpo
    from bat.state.atomic import atomic_write_json
    from bat.state.jsonl import write_jsonl
    from bat.state.markers import write_done
    from bat.train.phase import run_grpo

    rollouts, rewards = grpo_records
    layout = RunLayout(tmp_path / "run")
    plan = make_grpo_plan(str(tiny_dir), [["state0", "state1"], ["state2", "state3"]])
    layout.plan(1).parent.mkdir(parents=True)
    atomic_write_json(layout.plan(1), plan)
    files = {"rollout": [], "verify": []}
    for shard, half in enumerate((slice(0, 12), slice(12, None))):
        for phase, records in (("rollout", rollouts), ("verify", rewards)):
            layout_shard = layout.round(1).shard(phase, shard)
            path = layout_shard.rollouts if phase == "rollout" else layout_shard.rewards
            path.parent.mkdir(parents=True)
            write_jsonl(path, records[half])
            write_done(path.parent, phase=phase, config_hash="0" * 16, round_index=1)
            files[phase].append(str(path))
    overrides = [f"grpo.stage_row_credit={credit}", "grpo.max_seq_len=4096", f"grpo.shuffle_rewards={twin}"]
    cfg = load_config(None, overrides)
    monkeypatch.setattr(bat.train.grpo, "train_grpo", _stop_at_trainer)
    with pytest.raises(_Handed) as phase:
        run_grpo(PhaseContext(config=cfg, layout=layout, round=1, phase="grpo"))
    argv = ["train", "grpo", "--rollouts", *files["rollout"], "--rewards", *files["verify"], "--plan"]
    argv += [str(layout.plan(1)), "--model", str(tiny_dir), "--out", str(tmp_path / "out")]
    with pytest.raises(_Handed) as cli:
        main(argv + [arg for override in overrides for arg in ("--set", override)])
    assert phase.value.data.items
    assert _grpo_rows(cli.value.data) == _grpo_rows(phase.value.data)
    assert cli.value.data.counts == phase.value.data.counts
