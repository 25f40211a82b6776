"""Leases block a second owner, expire, and can be taken over when stale."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bat.state.lease import Lease, LeaseHeld


def test_second_owner_blocked_then_released(tmp_path: Path) -> None:
    path = tmp_path / "round_01.lease.json"
    first = Lease(path, owner="driver-a", ttl_s=60).acquire()
    with pytest.raises(LeaseHeld, match="driver-a"):
        Lease(path, owner="driver-b", ttl_s=60).acquire()
    first.release()
    second = Lease(path, owner="driver-b", ttl_s=60).acquire()
    assert second.owns() and not first.owns()


def test_expired_lease_is_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "l.json"
    Lease(path, owner="old", ttl_s=0.2).acquire()
    time.sleep(0.3)
    new = Lease(path, owner="new", ttl_s=60).acquire()
    assert Lease.read(path)["owner"] == "new" and new.owns()


def test_heartbeat_extends_and_detects_takeover(tmp_path: Path) -> None:
    path = tmp_path / "l.json"
    lease = Lease(path, owner="a", ttl_s=1).acquire()
    before = Lease.read(path)["expires"]
    time.sleep(0.05)
    lease.heartbeat()
    assert Lease.read(path)["expires"] > before
    info = Lease.read(path)
    info["token"] = "someone-else"
    path.write_text(json.dumps(info))
    with pytest.raises(LeaseHeld):
        lease.heartbeat()


def test_lease_of_dead_process_is_stale(tmp_path: Path) -> None:
    path = tmp_path / "l.json"
    code = f"from bat.state.lease import Lease; Lease({str(path)!r}, owner='ghost', ttl_s=3600).acquire()"
    subprocess.run([sys.executable, "-c", code], check=True)
    assert Lease.read(path)["owner"] == "ghost"
    assert Lease(path, owner="alive", ttl_s=60).acquire().owns()
