"""scripts/device/smoke_summary.py: the GPU smoke round's per-phase times and peak memory (run here on files)."""

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "device" / "smoke_summary.py"


def test_summary_lists_phase_times_peak_memory_and_the_plan(tmp_path):
    for phase, seconds in (("sft", 12.5), ("evaluate", 3.25)):
        folder = tmp_path / "state" / "round_00" / phase
        folder.mkdir(parents=True)
        (folder / "DONE.json").write_text(json.dumps({"extra": {"compute_s": seconds}}))
    (tmp_path / "mem.csv").write_text("100\n4000\n250\n")
    (tmp_path / "plan.txt").write_text("sft  needs 1.2 GiB per GPU\n")
    out = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "state"), str(tmp_path / "mem.csv"), str(tmp_path / "plan.txt")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "round_00/sft" in out and "12.5" in out and "round_00/evaluate" in out and "15.8" in out
    assert "peak GPU memory used (nvidia-smi, every 0.5 s): 4000 MiB" in out and "needs 1.2 GiB" in out
    bad = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True)
    assert bad.returncode == 2 and "Usage" in bad.stderr
