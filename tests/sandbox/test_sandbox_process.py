"""The `process` runtime: rlimits + process-group tree kill (weaker: no filesystem/network isolation)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from bat.sandbox import Sandbox


def test_timeout_kills_the_whole_tree(make_sandbox: Callable[..., Sandbox]) -> None:
    sb = make_sandbox("process", timeout_s=1)
    record = sb.execute_code("bash", "sleep 4343 & sleep 4343 & while true; do :; done")
    assert record.flags.timeout and not record.ok and record.signal is not None
    assert record.duration_s < 5
    time.sleep(0.2)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert "sleep 4343" not in ps


def test_output_flood_is_cut(make_sandbox: Callable[..., Sandbox]) -> None:
    sb = make_sandbox("process", timeout_s=2, max_output_chars=500)
    record = sb.execute_code("bash", "yes aaaaaaaaaaaaaaaa")
    assert record.flags.output_too_large and record.stdout_truncated
    assert len(record.stdout) < 700


def test_memory_limit(make_sandbox: Callable[..., Sandbox]) -> None:
    record = make_sandbox("process", memory_mb=400).execute_code("python", "b = bytearray(1 << 30)")
    assert record.flags.memory and record.error == "MemoryError: "


def test_python_writes_to_grader_are_recorded(make_sandbox: Callable[..., Sandbox], grader: Path) -> None:
    record = make_sandbox("process").execute_code("python", f"open('{grader}/planted.txt', 'w').write('x')")
    assert record.flags.access_outside and record.flags.breach
    assert any("protected" in line for line in record.evidence)
