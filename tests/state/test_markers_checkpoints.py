"""DONE markers record digests and counts; checkpoints are valid only with meta.json; keep-K; best pointer."""

from pathlib import Path

import pytest

from bat.state.checkpoints import CheckpointStore, read_best, write_best
from bat.state.digest import sha256_tree
from bat.state.layout import RunLayout
from bat.state.markers import phase_status, read_done, write_done


def test_done_marker_written_last_with_digests(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path / "run").ensure()
    phase = layout.phase_dir(1, "rollout")
    assert phase_status(phase) == "pending"
    phase.mkdir(parents=True)
    (phase / "shard_000.jsonl").write_text('{"a": 1}\n')
    assert phase_status(phase) == "partial"
    record = write_done(
        phase,
        phase="rollout",
        round_index=1,
        config_hash="abc",
        outputs=[phase],
        counts={"rollouts": 1},
        run_root=layout.root,
    )
    assert phase_status(phase) == "done"
    assert read_done(phase) == record
    assert record.outputs == {"round_01/rollout": sha256_tree(phase, exclude=("DONE.json",))}
    assert record.counts == {"rollouts": 1.0}


def test_checkpoints_valid_only_with_meta_and_pruned(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "ckpt")
    for step in (5, 10, 15, 20):
        with store.save(step, {"loss": step}, keep=3) as tmp:
            (tmp / "weights.bin").write_bytes(b"w" * step)
    (tmp_path / "ckpt" / "step_000025").mkdir()  # half-written: no meta.json
    assert store.valid_steps() == [10, 15, 20]
    assert store.latest()[0] == 20
    assert store.meta(15)["loss"] == 15
    store.prune(2)
    assert store.valid_steps() == [15, 20]
    assert not (tmp_path / "ckpt" / "step_000025").exists()
    best = tmp_path / "best.json"
    assert read_best(best) is None
    write_best(best, store.path(20), round_index=2, score=41.5)
    assert read_best(best)["round"] == 2


def test_layout_bank_versions_and_rounds(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path).ensure()
    for v in (1, 2, 3):
        layout.bank(v).mkdir(parents=True)
    layout.bank_version(2).admitted_marker.write_text("")
    assert layout.bank_versions() == [1, 2, 3]
    assert layout.newest_admitted_bank() == 2
    layout.round_dir(0).mkdir()
    layout.round_dir(3).mkdir()
    assert layout.rounds() == [0, 3]
    assert layout.heldout_runs(3).is_relative_to(layout.heldout_dir)


@pytest.mark.parametrize(
    "content",
    [b'{"phase": "sft", "con', b"{}", b"[1, 2]", b"\xff\xfe"],
    ids=["torn", "empty-object", "not-an-object", "not-utf8"],
)
def test_damaged_marker_is_a_clear_error_not_done(tmp_path, content):
    from bat.state.errors import StateFileError
    from bat.state.markers import DONE_NAME, is_done, read_done

    (tmp_path / DONE_NAME).write_bytes(content)
    for reader in (read_done, is_done):
        with pytest.raises(StateFileError) as info:
            reader(tmp_path)
        message = str(info.value)
        assert str(tmp_path / DONE_NAME) in message and "rerun the same command to redo the phase" in message
