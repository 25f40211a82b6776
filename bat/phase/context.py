"""The contract every phase function follows: `def run(ctx: PhaseContext) -> PhaseResult`.

A phase reads and writes only under `ctx.layout`, takes every knob from `ctx.config`, derives its
seeds with `ctx.seed(...)`, writes its outputs into `ctx.phase_dir` (resuming from partial outputs
it finds there) and returns counts/outputs; the orchestrator writes `DONE.json` afterwards.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.seeds import derive_seed
from bat.state.layout import RunLayout

if TYPE_CHECKING:
    from bat.config.root import BatConfig


@dataclass(frozen=True)
class PhaseContext:
    """Everything a phase may touch: resolved config, state layout, round index and phase name."""

    config: BatConfig
    layout: RunLayout
    round: int
    phase: str

    @property
    def phase_dir(self) -> Path:
        return self.layout.phase_dir(self.round, self.phase)

    def seed(self, *parts: object) -> int:
        """Seed from (run seed, round, phase, *parts), e.g. `ctx.seed("shard", 3)`."""
        return derive_seed(self.config.run.seed, self.round, self.phase, *parts)


@dataclass
class PhaseResult:
    """What a phase reports back; recorded in its DONE.json."""

    outputs: list[Path] = field(default_factory=list)
    """Files or directories the phase produced (digested into DONE.json)."""
    inputs: list[Path] = field(default_factory=list)
    """Files or directories the phase consumed (digested into DONE.json)."""
    counts: dict[str, int | float] = field(default_factory=dict)
    """Row/rollout/step counts and headline numbers."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Anything else worth recording (JSON-serialisable)."""


PhaseFn = Callable[[PhaseContext], PhaseResult]
