"""State packages: an immutable directory of plain files + metadata + a sha256 digest of the tree.

Layout of a package directory:
```
<package>/package.json   PackageManifest (schema_version, digest, files, metadata)
<package>/files/...      the workspace content, copied verbatim
```
The digest covers relative paths, the executable bit and file contents (directories included, so
empty directories survive); symlinks, devices and sockets are refused.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from bat.state.atomic import atomic_dir, atomic_write_json, read_json

MANIFEST_NAME = "package.json"
FILES_DIR = "files"


class DigestMismatchError(ValueError):
    """A materialised tree does not match the digest recorded in its package."""


class FileEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    """POSIX path relative to the package root; directories end with `/`."""
    size: int = 0
    sha256: str = ""
    executable: bool = False


class PackageManifest(BaseModel):
    """Contents of `package.json`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: int = 1
    digest: str
    """sha256 hex of the canonical tree listing (see `tree_digest`)."""
    files: list[FileEntry]
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Free-form provenance (state_id, track, stage, generator version, seeds)."""


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def tree_entries(root: str | os.PathLike[str]) -> list[FileEntry]:
    """List the plain files and directories under `root` (sorted); raise ValueError on anything else."""
    base = Path(root)
    if not base.is_dir():
        raise ValueError(f"not a directory: {base}")
    entries: list[FileEntry] = []
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        dirnames.sort()
        here = Path(dirpath)
        for name in [*dirnames, *sorted(filenames)]:
            full = here / name
            rel = full.relative_to(base).as_posix()
            info = full.lstat()
            if stat.S_ISDIR(info.st_mode):
                entries.append(FileEntry(path=rel + "/"))
            elif stat.S_ISREG(info.st_mode):
                entries.append(
                    FileEntry(
                        path=rel,
                        size=info.st_size,
                        sha256=_file_sha256(full),
                        executable=bool(info.st_mode & stat.S_IXUSR),
                    )
                )
            else:
                kind = "symlink" if stat.S_ISLNK(info.st_mode) else "special file"
                raise ValueError(f"{full}: {kind} not allowed in a state package; only regular files and directories")
    return sorted(entries, key=lambda e: e.path)


def digest_entries(entries: list[FileEntry]) -> str:
    """sha256 of the canonical listing `path NUL size NUL sha256 NUL x|- LF` over sorted entries."""
    digest = hashlib.sha256()
    for entry in sorted(entries, key=lambda e: e.path):
        line = f"{entry.path}\0{entry.size}\0{entry.sha256}\0{'x' if entry.executable else '-'}\n"
        digest.update(line.encode("utf-8"))
    return digest.hexdigest()


def tree_digest(root: str | os.PathLike[str]) -> str:
    """Digest of the tree under `root` (same value `build_package` records)."""
    return digest_entries(tree_entries(root))


def build_package(
    src: str | os.PathLike[str], dest: str | os.PathLike[str], metadata: dict[str, Any]
) -> PackageManifest:
    """Copy `src` into `dest/files/`, write `dest/package.json`; the whole package appears atomically."""
    src_path = Path(src)
    entries = tree_entries(src_path)
    manifest = PackageManifest(digest=digest_entries(entries), files=entries, metadata=dict(metadata))
    with atomic_dir(dest) as tmp:
        shutil.copytree(src_path, tmp / FILES_DIR, symlinks=True)
        copied = digest_entries(tree_entries(tmp / FILES_DIR))
        if copied != manifest.digest:
            raise DigestMismatchError(f"{src_path} changed while being packaged (digest {copied} != {manifest.digest})")
        atomic_write_json(tmp / MANIFEST_NAME, manifest)
    return manifest


def load_package(package: str | os.PathLike[str]) -> PackageManifest:
    """Read and validate `package/package.json`; ValueError names the package when it is missing."""
    path = Path(package)
    manifest_path = path / MANIFEST_NAME
    if not manifest_path.is_file():
        raise ValueError(
            f"{path}: not a state package (missing {MANIFEST_NAME}; expected {MANIFEST_NAME} + {FILES_DIR}/)"
        )
    return PackageManifest.model_validate(read_json(manifest_path))


def package_files(package: str | os.PathLike[str]) -> Path:
    """The `files/` directory of a package."""
    return Path(package) / FILES_DIR
