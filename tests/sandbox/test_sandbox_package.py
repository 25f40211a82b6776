"""State packages and workspaces: digest-checked materialisation, reset, refusal of odd files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bat.sandbox import DigestMismatchError, Workspace, build_package, load_package, tree_digest


def test_package_manifest_records_files_digest_and_metadata(package: Path) -> None:
    manifest = load_package(package)
    paths = [entry.path for entry in manifest.files]
    assert paths == ["data/", "data/case_001.txt", "task/", "task/README.md"]
    assert manifest.metadata == {"state_id": "st-001", "stage": "S3"}
    assert manifest.digest == tree_digest(package / "files")
    assert len(manifest.digest) == 64


def test_digest_depends_on_content_names_and_exec_bit(tmp_path: Path) -> None:
    tree = tmp_path / "t"
    tree.mkdir()
    (tree / "a.txt").write_text("x")
    first = tree_digest(tree)
    (tree / "a.txt").write_text("y")
    second = tree_digest(tree)
    os.chmod(tree / "a.txt", 0o755)
    third = tree_digest(tree)
    (tree / "a.txt").rename(tree / "b.txt")
    fourth = tree_digest(tree)
    assert len({first, second, third, fourth}) == 4
    (tree / "b.txt").rename(tree / "a.txt")
    assert tree_digest(tree) == third


def test_materialise_then_reset_discards_changes(workspace: Workspace) -> None:
    assert workspace.verify()
    (workspace.path / "data" / "case_001.txt").write_text("tampered")
    (workspace.path / "new.txt").write_text("extra")
    assert not workspace.verify()
    workspace.reset()
    assert workspace.verify()
    assert not (workspace.path / "new.txt").exists()
    assert (workspace.path / "data" / "case_001.txt").read_text() == "1 2 3\n"


def test_tampered_package_is_refused(package: Path, tmp_path: Path) -> None:
    (package / "files" / "task" / "README.md").write_text("changed after packaging")
    with pytest.raises(DigestMismatchError, match="package was modified"):
        Workspace.materialise(package, tmp_path / "ws2")
    assert not (tmp_path / "ws2").exists()


def test_symlinks_are_refused_in_packages(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "link").symlink_to("/etc/passwd")
    with pytest.raises(ValueError, match="symlink not allowed"):
        build_package(src, tmp_path / "pkg", {})
    assert not (tmp_path / "pkg").exists()


def test_loading_a_non_package_names_what_is_expected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="missing package.json"):
        load_package(tmp_path)
