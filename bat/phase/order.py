"""Phase names and the order they run in: the one definition the graph, the driver, `bat status`, the round
report and the config's validation read."""

from __future__ import annotations

BOOTSTRAP_ORDER = ("synthesize", "scan", "sft", "evaluate", "route")
"""Round 0: build the first bank, cold-start SFT, evaluate it, route."""
ROUND_ORDER = ("rollout", "verify", "grpo", "evaluate", "route")
"""Rounds r >= 1: BiCuRL inner loop then the outer-loop decision."""
ASYNC_ORDER = ("synthesize", "scan")
"""Bank refresh beside a round (CPU resources, off the critical path)."""
FINAL_ORDER = ("final_test",)
"""After the last round's route: the retained best on the untouched final + test splits, once per run."""

PHASE_NAMES = (*BOOTSTRAP_ORDER[:3], *ROUND_ORDER, *FINAL_ORDER)
"""Every phase once, in data-flow order (the bootstrap's evaluate and route are those of every round)."""
assert set(PHASE_NAMES) == {*BOOTSTRAP_ORDER, *ROUND_ORDER, *ASYNC_ORDER, *FINAL_ORDER}
