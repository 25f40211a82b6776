"""Runtime selection, limits and argv construction (bwrap, process, apptainer)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from bat.config.sandbox import SandboxConfig
from bat.sandbox import RUNTIMES, get_runtime
from bat.sandbox.limits import Limits, prlimit_argv
from bat.sandbox.runtimes import python_env


def _argv(name: str, tmp_path: Path, **fields: str) -> list[str]:
    config = SandboxConfig(timeout_s=2, memory_mb=256, nproc=16, max_file_mb=3, **fields)
    limits = Limits.from_config(config)
    return get_runtime(name, config).argv(
        ["python3", "-c", "pass"],
        workspace=tmp_path / "ws",
        scratch=tmp_path / "s",
        cwd="/workspace",
        limits=limits,
        pyenv=python_env(sys.executable, ()),
        drop_uid=65534,
    )


def test_unknown_runtime_lists_valid_names() -> None:
    with pytest.raises(ValueError, match=r"valid: \['apptainer', 'bwrap', 'process'\]"):
        get_runtime("docker")
    with pytest.raises(ValidationError, match="bwrap"):
        SandboxConfig(runtime="docker")
    assert sorted(RUNTIMES) == ["apptainer", "bwrap", "process"]


def test_limits_from_config_and_overrides() -> None:
    limits = Limits.from_config(SandboxConfig(timeout_s=2.5), memory_mb=300)
    assert (limits.timeout_s, limits.cpu_s, limits.memory_mb) == (2.5, 4, 300)
    assert Limits.from_config(SandboxConfig(cpu_s=7)).cpu_s == 7
    with pytest.raises(ValueError, match="unknown limit.*'colour'.*valid"):
        Limits.from_config(SandboxConfig(), colour=1)
    argv = prlimit_argv(Limits.from_config(SandboxConfig(memory_mb=256, nproc=16, max_file_mb=3, cpu_s=5)))
    assert argv == [
        "prlimit",
        f"--as={256 << 20}",
        "--cpu=5:6",
        "--nproc=16",
        f"--fsize={3 << 20}",
        "--nofile=256",
        "--core=0",
        "--",
    ]


def test_bwrap_argv_has_one_writable_bind_and_no_network(tmp_path: Path) -> None:
    argv = _argv("bwrap", tmp_path)
    assert "--die-with-parent" in argv
    assert "--unshare-net" in argv or "--unshare-all" in argv
    writable = [argv[i + 1 : i + 3] for i, a in enumerate(argv) if a == "--bind"]
    assert writable == [[str(tmp_path / "ws"), "/workspace"]]
    assert argv[argv.index("--tmpfs") + 1] == "/tmp"
    assert argv[argv.index("--chdir") + 1] == "/workspace"
    assert argv[-3:] == ["python3", "-c", "pass"]
    assert any(a.startswith("--nproc=16") for a in argv)
    ro = [argv[i + 2] for i, a in enumerate(argv) if a == "--ro-bind"]
    assert "/usr" in ro and not any(p == "/" or p.startswith("/home") for p in ro)


def test_process_argv_is_prlimit_then_command(tmp_path: Path) -> None:
    argv = _argv("process", tmp_path)
    assert argv[0].endswith("prlimit") and argv[-4:] == ["--", "python3", "-c", "pass"]


def test_apptainer_argv_needs_an_image(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="sandbox.apptainer_image"):
        _argv("apptainer", tmp_path)
    argv = _argv("apptainer", tmp_path, apptainer_image="/images/bat.sif")
    assert argv[1:3] == ["exec", "--containall"]
    assert argv[argv.index("--network") + 1] == "none"
    assert f"{tmp_path / 'ws'}:/workspace:rw" in argv
    assert "/images/bat.sif" in argv and argv[-3:] == ["python3", "-c", "pass"]


def test_protected_path_visible_to_the_sandbox_is_refused(tmp_path: Path) -> None:
    from bat.sandbox import Sandbox

    ws = tmp_path / "ws"
    (ws / "answers").mkdir(parents=True)
    with pytest.raises(ValueError, match="overlaps"):
        Sandbox(ws, SandboxConfig(runtime="process"), protected_paths=[ws / "answers"])
    with pytest.raises(ValueError, match="is not a directory"):
        Sandbox(tmp_path / "missing", SandboxConfig(runtime="process"))


def test_code_paths_make_extra_tool_packages_importable(tmp_path: Path) -> None:
    from bat.sandbox import Sandbox, bwrap_available

    if not bwrap_available():
        pytest.skip("bubblewrap not usable here")
    code = tmp_path / "toolpkg"
    code.mkdir()
    (code / "mytools.py").write_text("def hello(workspace, name):\n    return f'hello {name} from {workspace}'\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    sb = Sandbox(ws, SandboxConfig(runtime="bwrap", code_paths=(str(code),)))
    record = sb.call_tool("mytools:hello", {"name": "bat"})
    assert record.ok and record.result == "hello bat from /workspace"
    assert sb.execute_code("bash", f"echo x > {code}/mytools.py").flags.access_outside  # read-only mount
    assert "hello(workspace, name)" in (code / "mytools.py").read_text()
