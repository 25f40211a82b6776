"""Shared fixtures: a small state package, a workspace materialised from it, a grader dir outside it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bat.config.sandbox import SandboxConfig
from bat.sandbox import Sandbox, Workspace, build_package, bwrap_available


@pytest.fixture()
def package(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "data").mkdir(parents=True)
    (src / "task").mkdir()
    (src / "task" / "README.md").write_text("# brief\nsegment the cases\n")
    (src / "data" / "case_001.txt").write_text("1 2 3\n")
    build_package(src, tmp_path / "pkg", {"state_id": "st-001", "stage": "S3"})
    return tmp_path / "pkg"


@pytest.fixture()
def workspace(tmp_path: Path, package: Path) -> Workspace:
    return Workspace.materialise(package, tmp_path / "ws")


@pytest.fixture()
def grader(tmp_path: Path) -> Path:
    path = tmp_path / "grader"
    path.mkdir()
    (path / "truth.json").write_text('{"answer": "hidden-label-42"}\n')
    return path


@pytest.fixture()
def make_sandbox(workspace: Workspace, grader: Path) -> Callable[..., Sandbox]:
    """Factory: `make_sandbox("bwrap", timeout_s=2)` -> Sandbox over the workspace, grader protected."""

    def make(runtime: str, **limits: float | int) -> Sandbox:
        if runtime == "bwrap" and not bwrap_available():
            pytest.skip("bubblewrap is not installed or cannot create namespaces here (apt-get install bubblewrap)")
        return Sandbox(workspace.path, SandboxConfig(runtime=runtime, **limits), protected_paths=[grader])

    return make
