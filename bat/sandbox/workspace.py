"""Workspaces materialised from state packages: a fresh copy checked against the package digest."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from bat.sandbox.package import DigestMismatchError, PackageManifest, load_package, package_files, tree_digest
from bat.state.atomic import atomic_dir


@dataclass
class Workspace:
    """A writable directory made from a state package; `reset()` throws away every change."""

    path: Path
    package: Path
    manifest: PackageManifest

    @classmethod
    def materialise(cls, package: str | os.PathLike[str], workspace: str | os.PathLike[str]) -> Workspace:
        """Copy `package/files/` to `workspace` (replacing it) and verify the digest; returns the Workspace."""
        manifest = load_package(package)
        ws = cls(path=Path(workspace).resolve(), package=Path(package).resolve(), manifest=manifest)
        ws.reset()
        return ws

    def reset(self) -> None:
        """Re-materialise from the package: a fresh copy, digest-checked, swapped in atomically."""
        source = package_files(self.package)
        if not source.is_dir():
            raise ValueError(f"{self.package}: package has no files/ directory")
        with atomic_dir(self.path) as tmp:
            os.rmdir(tmp)
            shutil.copytree(source, tmp, symlinks=True)
            found = tree_digest(tmp)
            if found != self.manifest.digest:
                raise DigestMismatchError(
                    f"{self.package}: materialised tree digest {found} != package digest {self.manifest.digest}"
                    " (the package was modified after it was built)"
                )

    def verify(self) -> bool:
        """True when the workspace still equals its package (nothing changed since reset)."""
        try:
            return tree_digest(self.path) == self.manifest.digest
        except ValueError:
            return False
