"""`bat sandbox exec` and `bat sandbox selftest` through the real CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bat.cli.main import main
from bat.sandbox import bwrap_available


def test_exec_prints_the_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["sandbox", "exec", "--workspace", str(tmp_path), "--runtime", "process", "--python", "print(2 + 2)"])
    record = json.loads(capsys.readouterr().out)
    assert code == 0 and record["stdout"] == "4\n" and record["ok"] is True
    code = main(
        [
            "sandbox",
            "exec",
            "--workspace",
            str(tmp_path),
            "--runtime",
            "process",
            "--tool",
            "bat.sandbox.tools:write_file",
            "--args",
            '{"path": "a.txt", "content": "hi"}',
        ]
    )
    record = json.loads(capsys.readouterr().out)
    assert code == 0 and record["files_changed"]["added"] == ["a.txt"] and (tmp_path / "a.txt").read_text() == "hi"


def test_bad_runtime_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sandbox", "exec", "--workspace", str(tmp_path), "--runtime", "docker", "--bash", "true"]) == 2
    assert "valid: bwrap, process, apptainer" in capsys.readouterr().err


def test_selftest_cli(capsys: pytest.CaptureFixture[str]) -> None:
    if not bwrap_available():
        pytest.skip("bubblewrap not usable here")
    assert main(["sandbox", "selftest", "--only", "network_bash", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["name"] == "network_bash" and rows[0]["passed"] is True
