"""Leases: a lock file with owner, host, pid, heartbeat and expiry, so two drivers cannot queue the same round.

Acquisition is an atomic `O_CREAT|O_EXCL` create; a lease whose expiry has passed (or whose owner
process is gone on this host) is stale and may be taken over.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from bat.state.atomic import atomic_write_json


class LeaseHeld(RuntimeError):
    """Raised when another live owner holds the lease."""


@dataclass
class Lease:
    """One lease file. `ttl_s` is how long a heartbeat keeps it alive."""

    path: Path
    owner: str
    ttl_s: float = 300.0
    token: str = ""

    def _payload(self) -> dict:
        now = time.time()
        return {
            "owner": self.owner,
            "token": self.token,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "heartbeat": now,
            "expires": now + self.ttl_s,
        }

    @staticmethod
    def read(path: Path) -> dict | None:
        """Current lease contents, or None when absent or unreadable (a torn create)."""
        try:
            return json.loads(Path(path).read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    @staticmethod
    def is_stale(info: dict | None, now: float | None = None) -> bool:
        """A lease is stale when expired, unreadable, or its pid is gone on this host."""
        if info is None:
            return True
        now = time.time() if now is None else now
        if float(info.get("expires", 0)) <= now:
            return True
        if info.get("host") == socket.gethostname():
            try:
                os.kill(int(info.get("pid", -1)), 0)
            except ProcessLookupError:
                return True
            except (PermissionError, ValueError):
                pass
        return False

    def acquire(self) -> Lease:
        """Take the lease, or take over a stale one; raise LeaseHeld naming the live owner otherwise."""
        path = Path(self.path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.token = uuid.uuid4().hex
        for _ in range(3):
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                info = self.read(path)
                if info is None:
                    # Being created right now by someone else, or torn: give it a moment.
                    time.sleep(0.05)
                    info = self.read(path)
                if not self.is_stale(info):
                    raise LeaseHeld(
                        f"lease {path} is held by {info['owner']} (host {info['host']}, pid {info['pid']}) "
                        f"until {time.strftime('%H:%M:%S', time.localtime(info['expires']))}"
                    ) from None
                stale = path.with_name(f"{path.name}.stale-{uuid.uuid4().hex[:8]}")
                try:
                    os.replace(path, stale)
                    os.unlink(stale)
                except FileNotFoundError:
                    pass
                continue
            with os.fdopen(fd, "w") as handle:
                json.dump(self._payload(), handle)
                handle.flush()
                os.fsync(handle.fileno())
            return self
        raise LeaseHeld(f"lease {path}: could not acquire after taking over a stale lease (contention)")

    def owns(self) -> bool:
        info = self.read(Path(self.path))
        return bool(info) and info.get("token") == self.token

    def heartbeat(self) -> None:
        """Extend the expiry; raises LeaseHeld if someone else took the lease over."""
        if not self.owns():
            raise LeaseHeld(f"lease {self.path} is no longer ours")
        atomic_write_json(self.path, self._payload())

    def release(self) -> None:
        if self.owns():
            Path(self.path).unlink(missing_ok=True)

    def __enter__(self) -> Lease:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
