"""State packages p (Eq. 11) in the sandbox package format (`bat.sandbox.package`): `files/` + `package.json`.

Bank-side helpers: pack a replayed workspace, verify a stored package, materialise it into a fresh workspace,
and the `sha256:<hex>` digest form used in `StateRef`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bat.sandbox import DigestMismatchError, PackageManifest, Workspace, build_package, load_package, tree_digest
from bat.sandbox.package import package_files

StateDigestError = DigestMismatchError
"""Raised when a package's files differ from the digest recorded in its `package.json`."""

__all__ = [
    "StateDigestError",
    "materialize",
    "pack_workspace",
    "prefixed",
    "tree_digest",
    "verify_package",
]


def prefixed(hex_digest: str) -> str:
    """`sha256:<hex>` form of a sandbox tree digest (what `StateRef.digest` stores)."""
    return hex_digest if hex_digest.startswith("sha256:") else f"sha256:{hex_digest}"


def pack_workspace(workspace: Path, dest: Path, metadata: dict[str, Any] | None = None) -> PackageManifest:
    """Copy `workspace` into the package `dest` (atomic; symlinks/special files refused); returns its manifest."""
    workspace = Path(workspace)
    if not workspace.is_dir():
        raise FileNotFoundError(f"workspace to pack does not exist: {workspace}")
    return build_package(workspace, dest, metadata or {})


def verify_package(state_dir: Path) -> PackageManifest:
    """Recompute the tree digest of `state_dir/files/` and compare with `package.json`; returns the manifest."""
    manifest = load_package(state_dir)
    found = tree_digest(package_files(state_dir))
    if found != manifest.digest:
        raise StateDigestError(f"state package {state_dir}: files digest {found} != recorded {manifest.digest}")
    return manifest


def materialize(state_dir: Path, dest: Path) -> Path:
    """A fresh workspace at `dest` from the package (replacing `dest`), digest-checked; returns `dest`."""
    return Workspace.materialise(state_dir, dest).path
