"""Fingerprint index: entry validation, atomic save/load round trip, digest checks."""

from __future__ import annotations

import json

import pytest
from leakage_fixtures import HELDOUT_ENTRIES

from bat.config.leakage import LeakageConfig
from bat.leakage.index import KINDS, Entry, build_index, entries_digest, load_index, save_index


def test_bad_kind_lists_valid_kinds(config):
    with pytest.raises(ValueError, match="valid kinds: identifier, path, answer, text, field"):
        build_index([("secret", "x")], config)


def test_empty_value_and_bad_shape_are_rejected(config):
    with pytest.raises(ValueError, match="entry #1 \\(identifier\\) has an empty value"):
        build_index([("identifier", "abc-123"), ("identifier", "  ")], config)
    with pytest.raises(ValueError, match="expected \\(kind, value\\[, source\\]\\)"):
        build_index([("identifier",)], config)


def test_counts_dedupe_and_accepted_shapes(config):
    index = build_index(
        [
            ("identifier", "abc-123"),
            {"kind": "identifier", "value": "abc-123", "source": "dup"},
            Entry(kind="answer", value="42 mm lesion"),
        ],
        config,
    )
    assert index.counts() == {"identifier": 1, "path": 0, "answer": 1, "text": 0, "field": 0}
    assert set(index.counts()) == set(KINDS)


def test_save_load_round_trip(tmp_path, index, config):
    path = save_index(index, tmp_path / "fingerprints")
    meta = json.loads((path / "INDEX.json").read_text())
    assert meta["digest"] == index.digest == entries_digest(index.entries)
    assert meta["counts"]["text"] == 2
    loaded = load_index(path, config)
    assert loaded.digest == index.digest
    assert loaded.entries == index.entries
    assert len(loaded.windows) == len(index.windows) > 0
    assert not list(tmp_path.glob(".fingerprints*")), "no temp directory left behind"


def test_load_rebuilds_with_other_settings(tmp_path, index):
    path = save_index(index, tmp_path / "fp")
    other = load_index(path, LeakageConfig(shingle_size=3, minhash_perms=64))
    assert other.digest == index.digest
    assert other.config.shingle_size == 3


def test_tampered_or_incomplete_index_is_refused(tmp_path, index, config):
    path = save_index(index, tmp_path / "fp")
    with open(path / "entries.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"kind": "identifier", "value": "extra-999", "source": ""}) + "\n")
    with pytest.raises(ValueError, match="entries digest"):
        load_index(path, config)
    (path / "INDEX.json").unlink()
    with pytest.raises(FileNotFoundError, match="INDEX.json missing"):
        load_index(path, config)


def test_digest_ignores_order():
    a = [Entry(kind=k, value=v, source=s) for k, v, s in HELDOUT_ENTRIES]
    assert entries_digest(a) == entries_digest(list(reversed(a)))
