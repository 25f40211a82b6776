"""State packages (sandbox format) as the bank uses them: digests, verification, materialisation."""

from pathlib import Path

import pytest

from bat.bank.states import StateDigestError, materialize, pack_workspace, prefixed, tree_digest, verify_package


def _workspace(root: Path) -> Path:
    (root / "task").mkdir(parents=True)
    (root / "task" / "README.md").write_text("brief\n")
    (root / "data").mkdir()
    (root / "data" / "case_1.npy").write_bytes(b"\x00\x01\x02")
    return root


def test_pack_and_materialize_roundtrip(tmp_path):
    ws = _workspace(tmp_path / "ws")
    manifest = pack_workspace(ws, tmp_path / "pkg", {"stage": "S3"})
    assert {f.path for f in manifest.files} >= {"task/README.md", "data/case_1.npy"}
    assert manifest.digest == tree_digest(ws)
    assert manifest.metadata == {"stage": "S3"}
    assert prefixed(manifest.digest) == "sha256:" + manifest.digest
    out = materialize(tmp_path / "pkg", tmp_path / "fresh")
    assert tree_digest(out) == manifest.digest
    assert (out / "task" / "README.md").read_text() == "brief\n"
    (out / "scratch.txt").write_text("agent work")
    again = materialize(tmp_path / "pkg", tmp_path / "fresh")
    assert not (again / "scratch.txt").exists()


def test_tampered_package_is_refused(tmp_path):
    ws = _workspace(tmp_path / "ws")
    pack_workspace(ws, tmp_path / "pkg")
    verify_package(tmp_path / "pkg")
    (tmp_path / "pkg" / "files" / "data" / "case_1.npy").write_bytes(b"changed")
    with pytest.raises(StateDigestError):
        verify_package(tmp_path / "pkg")
    with pytest.raises(StateDigestError):
        materialize(tmp_path / "pkg", tmp_path / "fresh")


def test_digest_depends_on_paths_and_content(tmp_path):
    a = _workspace(tmp_path / "a")
    b = _workspace(tmp_path / "b")
    assert tree_digest(a) == tree_digest(b)
    (b / "data" / "case_1.npy").rename(b / "data" / "case_2.npy")
    assert tree_digest(a) != tree_digest(b)


def test_symlinks_are_refused(tmp_path):
    ws = _workspace(tmp_path / "ws")
    (ws / "link").symlink_to("/etc/passwd")
    with pytest.raises(ValueError, match="symlink"):
        pack_workspace(ws, tmp_path / "pkg")
