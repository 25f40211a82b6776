"""Baseline arms as config, not code forks: `sft` (no RL rounds), `grpo` (E2E rows, single final reward),
`bicurl` (routed target stage over any subset of pools)."""

from __future__ import annotations

from dataclasses import dataclass

from bat.config.curriculum import CurriculumConfig


@dataclass(frozen=True)
class ArmSpec:
    arm: str
    pools: tuple[str, ...]
    """Pools that enter training (empty for `sft`)."""
    reward_mode: str
    """`rubric` (stage rubric rewards) or `final` (single final reward on E2E rows)."""
    rl: bool
    """Whether RL rounds run after the bootstrap round."""
    routed: bool
    """Whether a target stage is chosen (needs S-target or S-mix)."""


def resolve_arm(cfg: CurriculumConfig) -> ArmSpec:
    """The effective pools, reward mode and routing of the configured arm."""
    if cfg.arm == "sft":
        return ArmSpec(arm="sft", pools=(), reward_mode="rubric", rl=False, routed=False)
    if cfg.arm == "grpo":
        return ArmSpec(arm="grpo", pools=("E2E",), reward_mode="final", rl=True, routed=False)
    pools = tuple(cfg.pools)
    return ArmSpec(
        arm="bicurl", pools=pools, reward_mode="rubric", rl=True, routed=any(p in pools for p in ("S-target", "S-mix"))
    )
