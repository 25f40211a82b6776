"""Summarise a smoke round on a GPU machine: per-phase compute time (each phase's DONE.json) and the peak GPU memory
sampled by nvidia-smi while the round ran, next to the resource plan `bat config plan` printed for the same config.

Usage: python scripts/device/smoke_summary.py STATE_DIR GPU_MEM_CSV PLAN_TXT
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def phase_times(state: Path) -> list[tuple[str, float]]:
    """(round_NN/phase, compute seconds) for every finished phase, in round then data-flow order of finishing."""
    rows = []
    for done in sorted(state.glob("round_*/*/DONE.json"), key=lambda p: p.stat().st_mtime):
        extra = json.loads(done.read_text()).get("extra", {})
        rows.append((f"{done.parent.parent.name}/{done.parent.name}", float(extra.get("compute_s", 0.0))))
    return rows


def peak_mib(csv: Path) -> int | None:
    """Largest `memory.used` sample (MiB) over every GPU and sample; None without samples."""
    values = [int(v) for line in csv.read_text().splitlines() for v in line.split(",") if v.strip().isdigit()]
    return max(values) if values else None


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    state, csv, plan = (Path(a) for a in argv)
    rows = phase_times(state)
    width = max((len(name) for name, _ in rows), default=10)
    print(f"{'phase':<{width}}  compute s")
    for name, seconds in rows:
        print(f"{name:<{width}}  {seconds:9.1f}")
    print(f"{'total':<{width}}  {sum(s for _, s in rows):9.1f}")
    peak = peak_mib(csv) if csv.exists() else None
    print(f"peak GPU memory used (nvidia-smi, every 0.5 s): {peak if peak is not None else '?'} MiB")
    print("the plan for the same config (bat config plan):")
    print(plan.read_text() if plan.exists() else "(no plan output)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
