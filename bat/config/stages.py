"""The ordered stage list of the staged benchmark. Its default is the built-in benchmark's stages, declared by that
plug-in (`bat.benchmarks.builtin_spec`); a plug-in benchmark named by `benchmark.name` supplies its own
(`bat.config.benchmark.plugin_stage_defaults`)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from pydantic import Field

from bat.config.base import Section


class StageSpec(Section):
    key: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_]*$")
    """Stage key used in rows, rubrics and reports (e.g. `S1` of the built-in benchmark, `draft` of sqlqa)."""
    name: str
    """Human-readable stage name (e.g. `Plan`)."""
    weight: float = Field(gt=0.0, le=1.0)
    """Weight of the stage in the Agentic score; weights must sum to 1."""


def builtin_declared() -> ModuleType:
    """The built-in benchmark's declared stages, tracks, contract and late stages as plain data
    (`bat.benchmarks.builtin_spec`, imported on first use: it imports nothing from bat)."""
    from bat.benchmarks import builtin_spec

    return builtin_spec


def builtin_stages() -> tuple[StageSpec, ...]:
    """The built-in benchmark's ordered stages (the default of the top-level `stages`)."""
    return tuple(StageSpec(**stage) for stage in builtin_declared().STAGES)


def __getattr__(name: str) -> Any:
    """`DEFAULT_STAGES`: the built-in benchmark's stages, read from the plug-in on first use."""
    if name == "DEFAULT_STAGES":
        return builtin_stages()
    raise AttributeError(f"module 'bat.config.stages' has no attribute {name!r}")
