"""Atomic writes: a writer killed between write and rename leaves the old file intact."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bat.state.atomic import atomic_dir, atomic_write_json, atomic_write_text, current_umask, read_json


def test_atomic_write_replaces_content(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "x.json"
    atomic_write_json(target, {"a": 1})
    atomic_write_json(target, {"a": 2})
    assert read_json(target) == {"a": 2}
    assert [p.name for p in target.parent.iterdir()] == ["x.json"]


def test_kill_between_write_and_rename_keeps_old_file(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    atomic_write_json(target, {"version": "old"})
    flag = tmp_path / "written"
    script = textwrap.dedent(
        f"""
        import os, time, pathlib
        import bat.state.atomic as atomic
        real_replace = os.replace
        def slow_replace(src, dst):
            pathlib.Path({str(flag)!r}).write_text("ok")
            time.sleep(60)
            real_replace(src, dst)
        atomic.os.replace = slow_replace
        atomic.atomic_write_json({str(target)!r}, {{"version": "new", "pad": "x" * 100000}})
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.time() + 30
    while not flag.exists() and time.time() < deadline:
        time.sleep(0.05)
    assert flag.exists(), "writer never reached the rename"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert read_json(target) == {"version": "old"}
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert len(leftovers) == 1  # the orphaned temp is there but never read as the file


def test_exception_removes_temp(tmp_path: Path) -> None:
    target = tmp_path / "t.json"
    with pytest.raises(TypeError):
        atomic_write_json(target, {"bad": object()})
    assert list(tmp_path.iterdir()) == []


def test_atomic_dir_replaces_only_on_success(tmp_path: Path) -> None:
    final = tmp_path / "pkg"
    with atomic_dir(final) as tmp:
        (tmp / "a.txt").write_text("1")
    assert (final / "a.txt").read_text() == "1"
    with pytest.raises(RuntimeError):
        with atomic_dir(final) as tmp:
            (tmp / "a.txt").write_text("2")
            raise RuntimeError("boom")
    assert (final / "a.txt").read_text() == "1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pkg"]


def test_read_json_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    atomic_write_text(bad, '{\n  "a": 1,\n  oops\n}\n')
    with pytest.raises(ValueError, match=r"bad\.json:3"):
        read_json(bad)
    assert json.loads('{"ok": true}')["ok"] is True


def test_atomic_files_and_dirs_get_plain_modes_not_private_temp_modes(tmp_path: Path) -> None:
    """A run directory shared by a cluster group must stay readable: no mkstemp 0600 / mkdtemp 0700 leaks."""
    old_mask = os.umask(0o022)
    try:
        fresh = atomic_write_text(tmp_path / "report.md", "x")
        assert fresh.stat().st_mode & 0o777 == 0o644
        with atomic_dir(tmp_path / "ckpt") as build:
            (build / "f").write_text("y")
        assert (tmp_path / "ckpt").stat().st_mode & 0o777 == 0o755
        os.umask(0o007)
        assert current_umask() == 0o007
        group = atomic_write_text(tmp_path / "group.md", "x")
        assert group.stat().st_mode & 0o777 == 0o660
        kept = tmp_path / "kept.json"
        kept.write_text("{}")
        kept.chmod(0o640)
        atomic_write_json(kept, {"a": 1})
        assert kept.stat().st_mode & 0o777 == 0o640, "rewriting a file keeps its mode, as open('w') would"
    finally:
        os.umask(old_mask)
