"""Done-when: with real bubblewrap isolation every escape attempt is contained and recorded, and the
next tool call in the same workspace still works."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bat.config.sandbox import SandboxConfig
from bat.sandbox import ExecutionRecord, Sandbox, Workspace, bwrap_available
from bat.sandbox.selftest import BAT_DIR, ESCAPES, SECRET, run_selftest

REPO = Path(__file__).resolve().parents[2]


def _tmp_mount_points() -> list[str]:
    """Names under /tmp that read-only code mounts create inside the sandbox when the checkout or venv lives
    under /tmp (e.g. a CI clone in /tmp/x): everything else in the sandbox's /tmp must be empty."""
    import sys

    from bat.sandbox.runtimes import python_env

    roots = python_env(sys.executable, ()).roots
    return sorted({Path(r).relative_to("/tmp").parts[0] for r in roots if Path(r).is_relative_to("/tmp")})


def _next_call_works(sb: Sandbox) -> ExecutionRecord:
    record = sb.call_tool("bat.sandbox.tools:list_files", {}, stage="S1")
    assert record.ok, record.model_dump()
    assert "task/README.md" in record.result
    return record


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_escape_is_contained_recorded_and_next_call_works(
    name: str, warm: bool, make_sandbox: Callable[..., Sandbox], workspace: Workspace, grader: Path
) -> None:
    escape = ESCAPES[name]
    sb = make_sandbox("bwrap", timeout_s=2, warm=warm, nproc=64, memory_mb=2048, max_file_mb=64)
    start = time.monotonic()
    record = sb.execute_code(
        escape.language, escape.template.format(grader=grader, bat=BAT_DIR), stage="S3", **escape.limits
    )
    elapsed = time.monotonic() - start
    assert escape.flag in record.flags.raised(), record.model_dump()
    assert not record.ok and record.stage == "S3"
    assert record.evidence, "every raised flag carries evidence"
    assert elapsed < 8.0
    assert SECRET not in record.stdout + record.stderr
    assert (grader / "truth.json").read_text() == f'{{"answer": "{SECRET}"}}\n'
    assert not (BAT_DIR / "sandbox" / "evil.py").exists()
    assert not Path("/usr/evil.txt").exists()
    assert len(record.stdout) < 2 * sb.config.max_output_chars
    assert [p for p in workspace.path.rglob("*") if p.is_symlink()] == []
    _next_call_works(sb)
    sb.close()


def test_selftest_passes_under_bwrap() -> None:
    if not bwrap_available():
        pytest.skip("bubblewrap not usable here")
    rows = run_selftest(SandboxConfig(runtime="bwrap"), ["read_grader_bash", "symlink_escape"])
    assert [(row.name, row.passed) for row in rows] == [("read_grader_bash", True), ("symlink_escape", True)]
    with pytest.raises(ValueError, match="does not isolate"):
        run_selftest(SandboxConfig(runtime="process"), ["read_grader_bash"])
    with pytest.raises(ValueError, match="unknown escape"):
        run_selftest(SandboxConfig(runtime="bwrap"), ["teleport"])


def test_breach_flags_mark_security_not_resources(make_sandbox: Callable[..., Sandbox], grader: Path) -> None:
    sb = make_sandbox("bwrap")
    assert sb.execute_code("bash", f"cat {grader}/truth.json").flags.breach
    loop = sb.execute_code("python", "while True:\n    pass", timeout_s=1)
    assert loop.flags.limited and not loop.flags.breach


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_no_process_survives_a_call(make_sandbox: Callable[..., Sandbox], warm: bool) -> None:
    with make_sandbox("bwrap", warm=warm) as sb:
        record = sb.execute_code("bash", "(setsid sleep 4242 &) ; nohup sleep 4242 >/dev/null 2>&1 & echo started")
        assert record.stdout.strip() == "started"
        time.sleep(0.2)
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
        assert "sleep 4242" not in ps
        assert sb.execute_code("bash", "ls /tmp; echo x > /tmp/left").ok
        left = sb.execute_code("bash", "ls /tmp").stdout.split()
        assert left == _tmp_mount_points()  # scratch does not carry over


def test_sandbox_view_is_minimal(make_sandbox: Callable[..., Sandbox]) -> None:
    sb = make_sandbox("bwrap")
    code = (
        "import os, json\n"
        "print(json.dumps({'cwd': os.getcwd(), 'files': sorted(os.listdir('.')), 'home': os.path.exists('/home'),"
        f" 'state': os.path.exists({str(REPO / 'state')!r}), 'tmp': sorted(os.listdir('/tmp'))}}))"
    )
    record = sb.execute_code("python", code)
    assert record.ok, record.model_dump()
    seen = json.loads(record.stdout)
    assert seen == {
        "cwd": "/workspace",
        "files": ["data", "task"],
        "home": False,
        "state": False,
        "tmp": _tmp_mount_points(),
    }


def test_tool_call_records_files_changed_and_stage(make_sandbox: Callable[..., Sandbox], workspace: Workspace) -> None:
    sb = make_sandbox("bwrap")
    record = sb.call_tool("bat.sandbox.tools:write_file", {"path": "plan/plan.md", "content": "# plan"}, stage="S1")
    assert record.ok and record.stage == "S1" and record.runtime == "bwrap"
    assert record.result == "wrote 6 chars to plan/plan.md"
    assert record.files_changed.added == ["plan", "plan/plan.md"]
    assert (workspace.path / "plan" / "plan.md").read_text() == "# plan"
    workspace.reset()
    assert workspace.verify()
    assert _next_call_works(sb).files_changed.any is False


def test_fifo_removed_and_oversized_workspace_flagged(
    make_sandbox: Callable[..., Sandbox], workspace: Workspace
) -> None:
    sb = make_sandbox("bwrap", max_file_mb=1, max_workspace_mb=1)
    record = sb.execute_code("bash", "mkfifo trap; head -c 700000 /dev/zero > a.bin; head -c 700000 /dev/zero > b.bin")
    assert any("removed special file trap" in line for line in record.evidence)
    assert not (workspace.path / "trap").exists()
    assert record.flags.file_size and not record.ok
    assert any("workspace holds" in line for line in record.evidence)


def test_runtime_that_cannot_boot_raises_infrastructure_error(workspace: Workspace, tmp_path: Path) -> None:
    from bat.sandbox import SandboxBootError

    if not bwrap_available():
        pytest.skip("bubblewrap not usable here")
    config = SandboxConfig(runtime="bwrap", code_paths=(str(tmp_path / "no-such-code-dir"),))
    sb = Sandbox(workspace.path, config)
    with pytest.raises(SandboxBootError, match="did not start the sandbox.*no-such-code-dir"):
        sb.call_tool("bat.sandbox.tools:list_files")
    faked = Sandbox(workspace.path, SandboxConfig(runtime="bwrap")).execute_code(
        "bash", "echo 'bwrap: fake' >&2; exit 1"
    )
    assert faked.exit_status == 1 and not faked.ok  # an agent cannot pass itself off as an infrastructure failure
