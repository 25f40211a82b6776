"""Run-level knobs: name, seed, round budget."""

from __future__ import annotations

from pydantic import Field

from bat.config.base import Section


class RunConfig(Section):
    name: str = Field("local", pattern=r"^[A-Za-z0-9_.-]+$")
    """Run name; used in reports and as the Slurm job-name prefix."""
    seed: int = Field(42, ge=0)
    """Run seed; every phase seed derives from (seed, round, phase, shard)."""
    rounds: int = Field(2, ge=0, le=1000)
    """Round budget: rounds of rollout -> verify -> grpo -> evaluate -> route after the bootstrap round 0."""
