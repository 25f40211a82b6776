"""Versioned immutable store: next free vNNNN, manifest digests, admitted-only opening, fingerprint lookup."""

import os

import pytest

from bat.bank import store
from bat.bank.pools import build_index
from bat.state.atomic import atomic_write_json, current_umask
from bat.state.bank_layout import RL_INDEX_FILE, RL_ROWS_FILE, BankVersionLayout
from bat.state.jsonl import write_jsonl
from bat.state.layout import RunLayout


def _fill(rows):
    def fill(build):
        write_jsonl(BankVersionLayout(build).rl_rows, rows)
        atomic_write_json(BankVersionLayout(build).rl_index, build_index(rows))
        (BankVersionLayout(build).state(rows[0].state_id) / "files").mkdir(parents=True)
        return {"rl": len(rows)}

    return fill


def _fields(fp="fp-1"):
    return dict(
        fingerprint=fp,
        generator_versions={"bank": "1"},
        seeds={"bank": 1},
        reduction_grid="v1",
        stages=["S1"],
        tracks=["classification"],
        config={},
    )


def test_versions_are_numbered_and_immutable(tmp_path, row_factory):
    layout = RunLayout(tmp_path / "run")
    rows = [row_factory("a1", "S1"), row_factory("e1", "E2E")]
    v1 = store.write_version(layout, _fill(rows), _fields("fp-1"))
    v2 = store.write_version(layout, _fill(rows), _fields("fp-2"))
    assert (v1.version, v2.version) == (1, 2)
    assert v1.path == layout.bank(1)
    assert [r.state_id for r in v1.rows()] == ["a1", "e1"]
    assert v1.index().by_stage["E2E"] == ["e1"]
    assert v1.manifest().counts == {"rl": 2}
    assert set(v1.manifest().digests) == {RL_ROWS_FILE, RL_INDEX_FILE}
    assert not os.access(v1.files.rl_rows, os.W_OK) or os.geteuid() == 0
    assert (os.stat(v1.files.rl_rows).st_mode & 0o222) == 0
    assert os.stat(v1.path).st_mode & 0o777 == 0o777 & ~current_umask(), "a version dir is not mkdtemp-private"
    v1.verify()
    assert v1.state_dir("a1").is_dir()
    assert not list(layout.bank_root.glob(".build-*"))


def test_tampering_is_detected(tmp_path, row_factory):
    layout = RunLayout(tmp_path / "run")
    bank = store.write_version(layout, _fill([row_factory("a1", "S1")]), _fields())
    path = bank.files.rl_index
    path.chmod(0o644)
    path.write_text("{}\n")
    with pytest.raises(ValueError, match="rl/index.json"):
        bank.verify()


def test_open_bank_pins_newest_admitted(tmp_path, row_factory):
    layout = RunLayout(tmp_path / "run")
    with pytest.raises(store.BankNotFoundError, match="bat bank synthesize"):
        store.open_bank(layout)
    rows = [row_factory("a1", "S1")]
    store.write_version(layout, _fill(rows), _fields("a"))
    store.write_version(layout, _fill(rows), _fields("b"))
    with pytest.raises(store.BankNotFoundError, match="admitted"):
        store.open_bank(layout)
    layout.bank_version(1).admitted_marker.write_text("")
    assert store.open_bank(layout).version == 1
    assert store.open_bank(layout, admitted_only=False).version == 2
    with pytest.raises(store.BankNotFoundError, match="not admitted"):
        store.open_bank(layout, 2)
    with pytest.raises(store.BankNotFoundError, match=r"complete versions: \[1, 2\]"):
        store.open_bank(layout, 7)
    assert store.find_by_fingerprint(layout, "b").version == 2
    assert store.find_by_fingerprint(layout, "zzz") is None


def test_failed_build_leaves_nothing(tmp_path):
    layout = RunLayout(tmp_path / "run")

    def boom(build):
        (build / "partial.txt").write_text("x")
        raise RuntimeError("teacher crashed")

    with pytest.raises(RuntimeError, match="teacher crashed"):
        store.write_version(layout, boom, _fields())
    assert layout.bank_versions() == []
    assert list(layout.bank_root.iterdir()) == []
