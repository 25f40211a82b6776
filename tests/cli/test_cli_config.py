"""`bat config check` exit codes and messages."""

import subprocess
import sys
from pathlib import Path

from bat.cli.main import main

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"


def test_config_check_ok_and_failure(tmp_path: Path, capsys) -> None:
    assert main(["config", "check", str(CONFIG_DIR / "smoke.yaml")]) == 0
    assert "ok" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text("grpo: {nonsense_knob: 3}\n")
    assert main(["config", "check", str(bad)]) == 2
    out = capsys.readouterr().out
    assert "grpo.nonsense_knob: unknown key" in out


def test_console_script_help_lists_groups() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "bat.cli.main", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "config" in out and "bench" in out
