"""Host-side checks: workspace diffs, escaping symlinks, protected-path fingerprints."""

from __future__ import annotations

import os
from pathlib import Path

from bat.sandbox.snapshot import contain_symlinks, diff, fingerprint, snapshot


def test_diff_reports_added_modified_removed(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("a")
    (tmp_path / "edit.txt").write_text("a")
    (tmp_path / "gone.txt").write_text("a")
    before = snapshot(tmp_path)
    (tmp_path / "edit.txt").write_text("bb")
    (tmp_path / "gone.txt").unlink()
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "new.txt").write_text("c")
    changed = diff(before, snapshot(tmp_path))
    assert changed.added == ["sub", "sub/new.txt"]
    assert changed.modified == ["edit.txt"]
    assert changed.removed == ["gone.txt"]


def test_escaping_symlinks_are_removed_and_inner_ones_rewritten(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("a")
    (ws / "out").symlink_to("/etc/passwd")
    (ws / "up").symlink_to("../secret")
    (ws / "rel").symlink_to("a.txt")
    (ws / "inner").symlink_to("/workspace/a.txt")
    evidence = contain_symlinks(ws, inner_root="/workspace")
    assert sorted(line.split()[1] for line in evidence) == ["out", "up"]
    assert not (ws / "out").is_symlink() and not (ws / "up").is_symlink()
    assert os.readlink(ws / "rel") == "a.txt"
    assert os.readlink(ws / "inner") == "a.txt"
    assert (ws / "inner").read_text() == "a"


def test_fingerprint_changes_when_protected_files_change(tmp_path: Path) -> None:
    grader = tmp_path / "grader"
    grader.mkdir()
    (grader / "truth.json").write_text("{}")
    before = fingerprint([grader])
    assert fingerprint([grader]) == before
    (grader / "extra").write_text("x")
    assert fingerprint([grader]) != before
    assert fingerprint([tmp_path / "missing"]) != fingerprint([grader])


def test_special_files_removed_and_hardlinks_not_chowned(tmp_path: Path) -> None:
    from bat.sandbox.snapshot import own_tree, remove_special_files

    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "plain.txt").write_text("x")
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    outside.write_text("host file")
    os.link(outside, tmp_path / "hard.txt")
    evidence = remove_special_files(tmp_path)
    assert len(evidence) == 1 and evidence[0].startswith("removed special file pipe (mode p")
    assert not (tmp_path / "pipe").exists()
    if os.geteuid() == 0:
        own_tree(tmp_path, 65534, 65534)
        assert (tmp_path / "plain.txt").stat().st_uid == 65534
        assert outside.stat().st_uid == 0  # the shared inode was left alone
    outside.unlink()
