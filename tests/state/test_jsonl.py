"""Versioned JSONL: torn and corrupt lines are reported with file:line, never skipped."""

from pathlib import Path

import pytest

from bat.schemas.base import Record
from bat.state.jsonl import CorruptRecordError, append_jsonl, read_jsonl, write_jsonl


class Row(Record):
    SCHEMA_VERSION = 2
    name: str
    value: int


def test_round_trip_with_schema(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    assert write_jsonl(path, [Row(name="a", value=1), {"name": "b", "value": 2, "schema_version": 2}]) == 2
    append_jsonl(path, [Row(name="c", value=3)])
    rows = read_jsonl(path, Row)
    assert [r.name for r in rows] == ["a", "b", "c"]
    assert all(r.schema_version == 2 for r in rows)


def test_torn_last_line_reported_with_line_number(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    write_jsonl(path, [Row(name="a", value=1), Row(name="b", value=2)])
    with open(path, "ab") as handle:
        handle.write(b'{"name": "c", "val')
    with pytest.raises(CorruptRecordError) as info:
        read_jsonl(path, Row)
    assert info.value.line == 3
    assert f"{path}:3" in str(info.value)


def test_invalid_json_in_the_middle(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"name": "a", "value": 1}\nnot json\n{"name": "b", "value": 2}\n')
    with pytest.raises(CorruptRecordError, match=r"rows\.jsonl:2: invalid JSON"):
        read_jsonl(path, Row)


def test_schema_mismatch_names_field(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"name": "a", "value": "many"}\n')
    with pytest.raises(CorruptRecordError, match=r":1: Row\.value"):
        read_jsonl(path, Row)


def test_wrong_schema_version_refused(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"name": "a", "value": 1, "schema_version": 1}\n')
    with pytest.raises(CorruptRecordError, match="schema_version 1 is not supported"):
        read_jsonl(path, Row)


def test_resuming_read_cuts_only_a_torn_final_line(tmp_path):
    import pytest

    from bat.state.jsonl import CorruptRecordError, read_jsonl_resuming, write_jsonl

    path = tmp_path / "partial.jsonl"
    write_jsonl(path, [{"a": 1}, {"a": 2}])
    assert read_jsonl_resuming(path) == ([{"a": 1}, {"a": 2}], False)
    path.write_bytes(path.read_bytes() + b'{"a": 3, "b')
    assert read_jsonl_resuming(path) == ([{"a": 1}, {"a": 2}], True)
    assert path.read_bytes().endswith(b'{"a":2}\n')
    path.write_bytes(b'{"a": 1}\n{"a": \n{"a": 3}\n')
    with pytest.raises(CorruptRecordError, match="partial.jsonl:2"):
        read_jsonl_resuming(path)


def test_a_torn_last_line_can_be_skipped_leaving_the_file_as_it_is(tmp_path: Path) -> None:
    """A reader beside a writer that is still appending takes the complete lines and changes nothing."""
    path = tmp_path / "p.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": 2}\n{"a": ')
    assert read_jsonl(path, skip_torn_tail=True) == [{"a": 1}, {"a": 2}]
    assert path.read_bytes().endswith(b'{"a": ')
    path.write_bytes(b'{"a": 1}\nnot json\n')
    with pytest.raises(CorruptRecordError):
        read_jsonl(path, skip_torn_tail=True)
