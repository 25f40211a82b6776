"""A build lock left by a killed job is removed (old), a live one is kept (young), and a waiter is released."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from bat.train.extension_locks import extensions_root, reap_stale_locks, remove_stale_locks


def _lock(path: Path, age_s: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    old = time.time() - age_s
    os.utime(path, (old, old))
    return path


def test_old_locks_go_young_locks_stay(tmp_path: Path) -> None:
    stale = _lock(tmp_path / "py311_cpu" / "deepspeed_shm_comm" / "lock", 3600)
    flat = _lock(tmp_path / "other_op" / "lock", 3600)
    live = _lock(tmp_path / "py311_cpu" / "fresh_op" / "lock", 5)
    keep = _lock(tmp_path / "py311_cpu" / "deepspeed_shm_comm" / "deepspeed_shm_comm.so", 3600)
    assert sorted(remove_stale_locks(tmp_path, max_age_s=600)) == sorted([stale, flat])
    assert not stale.exists() and not flat.exists() and live.exists() and keep.exists()


def test_root_follows_torch_extensions_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    assert extensions_root() == tmp_path
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR")
    assert extensions_root() == Path.home() / ".cache" / "torch_extensions"


def test_waiter_on_a_lock_that_ages_past_the_limit_is_released(tmp_path: Path) -> None:
    from torch.utils.file_baton import FileBaton  # what torch's JIT loader waits on

    lock = _lock(tmp_path / "py311_cpu" / "op" / "lock", 0)
    done = threading.Event()
    with reap_stale_locks(max_age_s=0.5, every_s=0.1, root=tmp_path):
        waiter = threading.Thread(target=lambda: (FileBaton(str(lock)).wait(), done.set()), daemon=True)
        waiter.start()
        assert done.wait(10.0), "the waiter was never released"
    assert not lock.exists()
