"""The experiment's typed records: every committed record loads and is written back byte for byte; a damaged or
foreign file is refused naming it; a record keeps only the keys it holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from bat.experiment.records import load_record, read_record, write_record
from bat.schemas.experiment import ArmRecord, SeedRun, SharedRecord, WideRecord
from bat.schemas.experiment_results import ExperimentResults
from bat.state.atomic import dumps_json
from bat.state.errors import StateFileError
from bat.state.experiment_layout import SHARED_PIECE_DIR_NAME, ResultsLayout

REPO = Path(__file__).resolve().parents[2]
ARMS_CPU = ResultsLayout(REPO / "docs" / "results" / "arms_cpu")


def _committed() -> list[tuple[Path, type]]:
    """Every committed record of the arms_cpu experiment with its record type."""
    pieces = [*ARMS_CPU.pieces_dir.glob("*/seed_*.json"), *(ARMS_CPU.root / "superseded").glob("*/*/seed_*.json")]
    out: list[tuple[Path, type]] = [
        (p, SharedRecord if p.parent.name == SHARED_PIECE_DIR_NAME else SeedRun) for p in pieces
    ]
    out += [(p, WideRecord) for p in (*ARMS_CPU.wide_pieces(), *ARMS_CPU.anchor_pieces())]
    out += [(ARMS_CPU.results, ExperimentResults), (REPO / "docs" / "results" / "results.json", ExperimentResults)]
    return sorted(out)


def test_every_committed_record_loads_and_is_written_back_byte_for_byte() -> None:
    records = _committed()
    kinds = {kind for _, kind in records}
    assert len(records) > 60 and kinds == {SeedRun, SharedRecord, WideRecord, ExperimentResults}
    for path, kind in records:
        record = load_record(path, kind)
        assert dumps_json(record.to_json()) == path.read_text(encoding="utf-8"), path


def test_the_committed_results_read_as_types() -> None:
    results = load_record(ARMS_CPU.results, ExperimentResults)
    bicurl = results.arms["bicurl"]
    assert results.reference_arm == "bicurl" and [s.seed for s in bicurl.seeds] == [1, 2, 3]
    assert all(s.done and s.aggregate is not None and s.aggregate.split == "final" for s in bicurl.done_seeds())
    assert bicurl.summary.mean["overall"] == pytest.approx(
        sum(bicurl.summary.track_means["overall"].values()) / len(bicurl.summary.track_means["overall"])
    )
    widest = results.widest_wide()
    assert (
        widest is not None
        and "sft" in widest.arms
        and widest.vs_anchor["bicurl"].n_runs == widest.arms["bicurl"].n_runs
    )
    older = load_record(REPO / "docs" / "results" / "results.json", ExperimentResults)  # before comparisons by split
    assert older.comparisons_by_split == {} and "comparisons_by_split" not in older.to_json()


def test_a_damaged_or_foreign_record_is_refused_naming_the_file(tmp_path: Path) -> None:
    torn = tmp_path / "experiment_arm.json"
    torn.write_text('{"arm": "grpo", "kind"')
    with pytest.raises(StateFileError, match="experiment_arm.json:1: invalid JSON"):
        read_record(torn, ArmRecord)
    foreign = tmp_path / "other.json"
    foreign.write_text('{"arm": "grpo", "kind": "trained", "seed": 1, "colour": "blue"}')
    with pytest.raises(StateFileError, match=r"other.json: not a ArmRecord record \(colour: Extra inputs"):
        read_record(foreign, ArmRecord)
    assert read_record(tmp_path / "absent.json", ArmRecord) is None
    with pytest.raises(StateFileError, match="absent.json: no ArmRecord record here"):
        load_record(tmp_path / "absent.json", ArmRecord)


def test_a_record_is_written_with_the_keys_it_holds(tmp_path: Path) -> None:
    record = ArmRecord(arm="grpo", kind="trained", seed=1, attempts=1)
    record.status, record.error = "failed", "RuntimeError: boom"
    path = write_record(tmp_path / "experiment_arm.json", record)
    written = load_record(path, ArmRecord).to_json()
    assert written == {
        "arm": "grpo",
        "kind": "trained",
        "seed": 1,
        "attempts": 1,
        "status": "failed",
        "error": "RuntimeError: boom",
    }
    assert "final_round" not in written and "config_hash" not in written  # never reached: not written as null
