"""The held-out secret: 256 random bits that, with `benchmark.heldout_seed`, derive every held-out instance.

Nothing public determines the held-out suite: not the config (its defaults are in the code every sandbox can
import), not the package, not the workspace (held-out instance ids and contents come from a 128-bit seed that
the secret enters). A run creates its secret at start in `heldout/SECRET` (mode 0600), where only evaluation and
the fingerprint export read it; sandboxes never mount the state directory. Standalone benchmark commands use one
secret per user (`bat.state.layout.user_heldout_secret`).

Reads and writes: the one secret file named by the caller.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bat.state.errors import StateFileError

if TYPE_CHECKING:
    from bat.state.layout import RunLayout

KEY_HEX_CHARS = 64


@dataclass(frozen=True)
class HeldoutSecret:
    """A held-out secret: `key` is 64 lowercase hex characters (256 bits)."""

    key: str

    def __post_init__(self) -> None:
        if len(self.key) != KEY_HEX_CHARS or any(c not in "0123456789abcdef" for c in self.key):
            raise ValueError(f"a held-out secret is {KEY_HEX_CHARS} lowercase hex characters")

    def __repr__(self) -> str:  # never print the key into a log
        return f"HeldoutSecret(fingerprint={self.fingerprint})"

    @property
    def fingerprint(self) -> str:
        """sha256 of the key (16 hex chars): names the suite a file came from without revealing the key."""
        return hashlib.sha256(("bat-heldout-secret:" + self.key).encode("ascii")).hexdigest()[:16]

    @classmethod
    def generate(cls) -> HeldoutSecret:
        return cls(secrets.token_hex(KEY_HEX_CHARS // 2))

    @classmethod
    def from_text(cls, label: str) -> HeldoutSecret:
        """A fixed secret derived from `label`: for tests and benches that need a reproducible suite, never for runs."""
        return cls(hashlib.sha256(("bat-heldout-label:" + label).encode("utf-8")).hexdigest())


def read_secret(path: str | os.PathLike[str]) -> HeldoutSecret:
    """Read the secret at `path`; a damaged file is a `StateFileError` naming it."""
    path = Path(path)
    try:
        text = path.read_text(encoding="ascii").strip()
        return HeldoutSecret(text)
    except (UnicodeDecodeError, ValueError):
        raise StateFileError(
            path,
            f"not a held-out secret ({KEY_HEX_CHARS} hex characters)",
            hint="restore it from a backup; without it this run's held-out suite cannot be rebuilt, "
            "so start a new --state directory otherwise",
        ) from None


def _write_new(path: Path, secret: HeldoutSecret) -> bool:
    """Write `secret` to `path` (0600) unless a file is there; True when this call wrote it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(secret.key + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, path)  # atomic create-if-absent: concurrent writers all keep the first secret
        except FileExistsError:
            return False
    finally:
        os.unlink(tmp)
    return True


def load_or_create_secret(path: str | os.PathLike[str]) -> HeldoutSecret:
    """The secret at `path`, created when absent (concurrent callers all get the first one written)."""
    path = Path(path)
    if not path.exists():
        fresh = HeldoutSecret.generate()
        if _write_new(path, fresh):
            return fresh
    return read_secret(path)


def install_secret(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> HeldoutSecret:
    """Give the run at `target` the secret at `source` (creating `source` first when absent), so both derive the same
    held-out suite; a different secret already at `target` is an error naming both files."""
    secret = load_or_create_secret(source)
    target = Path(target)
    if not target.exists() and _write_new(target, secret):
        return secret
    if read_secret(target) != secret:
        raise StateFileError(
            target,
            f"holds a different held-out secret than {source}",
            hint="the two runs would be evaluated on different held-out suites; start a new --state directory",
        )
    return secret


def run_secret(layout: RunLayout) -> HeldoutSecret:
    """The held-out secret of the run at `layout` (`heldout/SECRET`), created on the run's first held-out use.

    A run whose held-out side already has evaluations but no secret was evaluated on a suite that cannot be rebuilt
    (bat before held-out secrets): that is an error naming the file, never a silent switch to a new suite.
    """
    path = layout.heldout_secret
    if not path.exists() and any(layout.heldout_dir.glob("round_*")):
        raise StateFileError(
            path,
            "is missing, but this run already has held-out evaluations (made by a bat version "
            "without held-out secrets, or the file was deleted)",
            hint="later rounds would be evaluated on a different held-out suite; start a new --state directory",
        )
    return load_or_create_secret(path)
