"""Tool calls through the tool host (process runtime for speed): results, errors, caps, prints."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

import pytest

from bat.sandbox import Sandbox, Workspace


def test_tool_result_and_files_changed(make_sandbox: Callable[..., Sandbox], workspace: Workspace) -> None:
    sb = make_sandbox("process")
    record = sb.call_tool("bat.sandbox.tools:read_file", {"path": "data/case_001.txt"}, stage="S2")
    assert record.ok and record.result == "1 2 3\n" and record.exit_status == 0
    assert record.kind == "tool" and record.tool == "bat.sandbox.tools:read_file" and record.stage == "S2"
    assert record.args == {"path": "data/case_001.txt"}
    assert record.files_changed.any is False
    assert record.duration_s > 0


@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        ("no colon here", {}, "must look like 'pkg.module:function'"),
        ("bat.sandbox.tools:nope", {}, "callables there: ['list_files', 'read_file', 'write_file']"),
        ("bat.no_such_module:f", {}, "ModuleNotFoundError"),
        ("bat.sandbox.tools:read_file", {"path": "missing.txt"}, "FileNotFoundError"),
        ("bat.sandbox.tools:read_file", {"wrong": 1}, "TypeError"),
        ("bat.sandbox.tools:read_file", {"path": "../../etc/passwd"}, "leaves the workspace"),
    ],
)
def test_tool_errors_become_records(make_sandbox: Callable[..., Sandbox], tool: str, args: dict, expected: str) -> None:
    record = make_sandbox("process").call_tool(tool, args)
    assert not record.ok
    assert record.error is not None and expected in record.error
    assert record.result is None
    assert record.flags.raised() == []


def test_long_result_is_truncated(make_sandbox: Callable[..., Sandbox], workspace: Workspace) -> None:
    (workspace.path / "big.txt").write_text("y" * 50_000)
    sb = make_sandbox("process", max_output_chars=1000)
    record = sb.call_tool("bat.sandbox.tools:read_file", {"path": "big.txt", "max_chars": 40_000})
    assert record.ok
    assert len(record.result) < 1100 and "chars elided" in record.result


def test_non_json_result_is_an_error(make_sandbox: Callable[..., Sandbox]) -> None:
    record = make_sandbox("process").call_tool("os:getcwd", {})
    assert record.error and "TypeError" in record.error  # getcwd() takes no workspace argument
    record = make_sandbox("process").call_tool("pathlib:Path", {})
    assert record.error and "not JSON serializable" in record.error


def test_python_code_stdout_and_exit_codes(make_sandbox: Callable[..., Sandbox]) -> None:
    sb = make_sandbox("process")
    record = sb.execute_code("python", "print('hello'); import sys; print('warn', file=sys.stderr)")
    assert record.ok and record.stdout == "hello\n" and record.stderr == "warn"
    failed = sb.execute_code("python", "raise SystemExit(3)")
    assert failed.exit_status == 3 and not failed.ok
    crash = sb.execute_code("python", "1 / 0")
    assert crash.error == "ZeroDivisionError: division by zero" and crash.error_type == "ZeroDivisionError"
    assert "toolhost" not in crash.stderr and "<execute_code>" in crash.stderr


def test_unknown_language_lists_valid(make_sandbox: Callable[..., Sandbox]) -> None:
    with pytest.raises(ValueError, match=r"valid: \['python', 'bash'\]"):
        make_sandbox("process").execute_code("ruby", "puts 1")


def test_toolhost_entry_point_speaks_json(tmp_path) -> None:
    request = {"kind": "tool", "tool": "bat.sandbox.tools:list_files", "args": {}, "workspace": str(tmp_path)}
    (tmp_path / "x.txt").write_text("abc")
    done = subprocess.run(
        [sys.executable, "-m", "bat.sandbox.toolhost"],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    reply = json.loads(done.stdout)
    assert done.returncode == 0 and reply["ok"] and reply["result"] == "x.txt (3 bytes)"
    bad = subprocess.run(
        [sys.executable, "-m", "bat.sandbox.toolhost"], input="[]", capture_output=True, text=True, timeout=60, cwd="/"
    )
    assert bad.returncode == 2 and "kind 'tool' or 'python'" in json.loads(bad.stdout)["error"]


@pytest.mark.parametrize("runtime", ["process", "bwrap"])
def test_planted_modules_do_not_hijack_trusted_tools(
    make_sandbox: Callable[..., Sandbox], workspace: Workspace, runtime: str
) -> None:
    planted = workspace.path / "bat" / "sandbox"
    planted.mkdir(parents=True)
    for name in ("__init__.py", "tools.py"):
        (planted / name).write_text("def list_files(workspace):\n    return 'HIJACKED'\n")
    (workspace.path / "bat" / "__init__.py").write_text("")
    (workspace.path / "json.py").write_text("raise SystemExit('HIJACKED')\n")
    record = make_sandbox(runtime).call_tool("bat.sandbox.tools:list_files", {"path": "task"})
    assert record.ok and record.result == "task/README.md (26 bytes)"


def test_long_text_inside_an_object_result_keeps_the_shape() -> None:
    from bat.sandbox.toolhost import _cap_result

    capped, truncated = _cap_result({"text": "z" * 20_000, "meta": {"path": "a.txt"}}, 1000)
    assert truncated and capped["meta"] == {"path": "a.txt"} and "chars elided" in capped["text"]
    assert len(json.dumps(capped)) <= 1000
    assert _cap_result({"text": "short"}, 1000) == ({"text": "short"}, False)
    many, cut = _cap_result([str(i) for i in range(5000)], 1000)
    assert cut and isinstance(many, str) and len(many) < 1100
