"""Warm mode: one sandboxed tool server per workspace forks each call; same records, much faster."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bat.config.sandbox import SandboxConfig
from bat.sandbox import Sandbox, SandboxBootError, Workspace


@pytest.mark.parametrize("runtime", ["process", "bwrap"])
def test_warm_calls_match_cold_records(make_sandbox: Callable[..., Sandbox], runtime: str) -> None:
    with make_sandbox(runtime, warm=True, preload=("bat.sandbox.tools",)) as warm:
        cold = make_sandbox(runtime)
        for sb in (warm, cold):
            tool = sb.call_tool("bat.sandbox.tools:read_file", {"path": "data/case_001.txt"}, stage="S2")
            assert tool.ok and tool.result == "1 2 3\n" and tool.stage == "S2"
            code = sb.execute_code("python", "print(6 * 7)")
            assert code.ok and code.stdout == "42\n" and code.stderr == ""
            crash = sb.execute_code("python", "1 / 0")
            assert crash.error_type == "ZeroDivisionError" and not crash.ok
            bash = sb.execute_code("bash", "echo out; echo err >&2; exit 3")
            assert (bash.stdout, bash.stderr, bash.exit_status) == ("out\n", "err\n", 3)
        assert warm._warm is not None and warm._warm.preload_errors == []


def test_killing_the_server_is_the_calls_failure_and_the_next_call_restarts_it(
    make_sandbox: Callable[..., Sandbox],
) -> None:
    with make_sandbox("bwrap", warm=True) as sb:
        assert sb.call_tool("bat.sandbox.tools:list_files", {}).ok
        first = sb._warm
        record = sb.execute_code("bash", "kill -9 -1; sleep 1")
        assert not record.ok and record.signal == 9
        after = sb.call_tool("bat.sandbox.tools:list_files", {})
        assert after.ok and "task/README.md" in after.result
        assert sb._warm is not first


def test_reset_workspace_restarts_the_server(make_sandbox: Callable[..., Sandbox], workspace: Workspace) -> None:
    with make_sandbox("bwrap", warm=True) as sb:
        assert sb.call_tool("bat.sandbox.tools:write_file", {"path": "x.txt", "content": "1"}).ok
        workspace.reset()
        listing = sb.call_tool("bat.sandbox.tools:list_files", {})
        assert listing.ok and "x.txt" not in listing.result and "task/README.md" in listing.result


def test_preload_errors_are_reported_and_calls_still_work(make_sandbox: Callable[..., Sandbox]) -> None:
    with make_sandbox("process", warm=True, preload=("bat.no_such_module",)) as sb:
        assert sb.call_tool("bat.sandbox.tools:list_files", {}).ok
        assert sb._warm is not None and "ModuleNotFoundError" in sb._warm.preload_errors[0]


def test_server_that_cannot_boot_is_infrastructure(
    workspace: Workspace, tmp_path: Path, make_sandbox: Callable[..., Sandbox]
) -> None:
    make_sandbox("bwrap")  # skips when bwrap is unusable
    config = SandboxConfig(runtime="bwrap", warm=True, code_paths=(str(tmp_path / "missing-code"),))
    with pytest.raises(SandboxBootError, match="missing-code"):
        Sandbox(workspace.path, config).call_tool("bat.sandbox.tools:list_files", {})


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_exit_codes_and_signals_are_told_apart(make_sandbox: Callable[..., Sandbox], warm: bool) -> None:
    with make_sandbox("bwrap", warm=warm) as sb:
        killed = sb.execute_code("bash", "kill -9 $$")
        assert (killed.exit_status, killed.signal) == (None, 9) and killed.flags.raised() == []
        exited = sb.execute_code("bash", "exit 5")
        assert (exited.exit_status, exited.signal) == (5, None)
        burn = sb.execute_code("python", "while True:\n    pass", cpu_s=1, timeout_s=5)
        assert burn.flags.cpu and not burn.flags.timeout and burn.signal == 24  # SIGXCPU


def test_unclosed_warm_sandbox_cleans_up_when_collected(make_sandbox: Callable[..., Sandbox]) -> None:
    import gc

    sb = make_sandbox("process", warm=True)
    assert sb.call_tool("bat.sandbox.tools:list_files", {}).ok
    server = sb._warm
    assert server is not None
    proc, scratch = server.proc, server.scratch
    del sb, server
    gc.collect()
    assert proc.poll() is not None and not scratch.exists()


def test_emptying_the_scratch_never_enters_a_mount_inside_it(tmp_path: Path) -> None:
    """The server empties the scratch (the sandbox's /tmp tmpfs) after each call, but a file system mounted inside
    it (a checkout or venv under /tmp is bound there) is not the calls' to walk or delete: a writable bind of a host
    folder keeps its files, while the call's own files and folders go."""
    import subprocess
    import sys

    from bat.sandbox.runtimes import bwrap_available, python_env

    if not bwrap_available():
        pytest.skip("bubblewrap not usable here")
    kept = tmp_path / "kept"
    (kept / "deep").mkdir(parents=True)
    (kept / "deep" / "file.txt").write_text("host data\n")
    code = (
        "import os; from bat.sandbox.toolserver import _empty\n"
        "os.makedirs('/tmp/left/a/b'); open('/tmp/left/a/b/f', 'w').write('x'); open('/tmp/g', 'w').write('y')\n"
        "_empty('/tmp'); print(sorted(os.listdir('/tmp')), sorted(os.listdir('/tmp/x')))\n"
    )
    argv = ["bwrap", "--ro-bind", "/", "/", "--tmpfs", "/tmp", "--dir", "/tmp/x", "--bind", str(kept), "/tmp/x/kept"]
    under_tmp = [r for r in python_env(sys.executable, ()).roots if Path(r).is_relative_to("/tmp")]
    for root in under_tmp:  # a checkout or venv under /tmp (a CI clone): bound again over the tmpfs
        argv += ["--ro-bind", root, root]
    argv += ["--dev", "/dev", "--", sys.executable, "-c", code]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60).stdout
    names = sorted({"x", *(Path(r).relative_to("/tmp").parts[0] for r in under_tmp)})
    assert out.split("\n")[0] == f"{names} ['kept']"
    assert (kept / "deep" / "file.txt").read_text() == "host data\n"
