"""Record normalisation: reproducible (no timings) and machine-independent (no host paths)."""

import sys
from pathlib import Path

import bat
from bat.bank.teacher import alias_text, normalise_record
from bat.leakage.rules import find_machine_paths
from bat.sandbox import ExecutionRecord


def test_normalised_records_carry_no_host_paths_or_timings(tmp_path):
    code = Path(bat.__file__).resolve().parent
    ws, grader = tmp_path / "ws", tmp_path / "grader"
    stderr = (
        f'Traceback:\n  File "{code}/benchmark/tools/infer.py", line 81\n'
        f'  File "{sys.prefix}/lib/python3.11/site-packages/numpy/core.py", line 3\n'
        f"wrote {ws}/outputs/a.json, could not read {grader}/truth.json"
    )
    record = ExecutionRecord(
        kind="tool",
        tool="bat.benchmark.tools.infer:run_model",
        runtime="bwrap",
        duration_s=0.731,
        ok=False,
        error="ValueError: x",
        stderr=stderr,
    )
    data = normalise_record(record, ws, grader)
    assert data["duration_s"] == 0.0
    assert 'File "bat/benchmark/tools/infer.py"' in data["stderr"]
    assert "/workspace/outputs/a.json" in data["stderr"] and "<grader>/truth.json" in data["stderr"]
    assert list(find_machine_paths(data["stderr"], ("/workspace",))) == []
    assert ExecutionRecord.model_validate(data).stderr == data["stderr"]
    assert alias_text(f"see {ws}/plan.md", ws, grader) == "see /workspace/plan.md"
