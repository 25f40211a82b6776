"""The built-in benchmark's declaration (`bat.benchmarks.builtin_spec`, plain data) as config types: `STAGES`
(`StageSpec`s), `CONTRACT` (`StageContract` per stage key), `STAGE_KEYS`, `LATE_STAGES` and `TRACKS`."""

from __future__ import annotations

from bat.benchmarks import builtin_spec as declared
from bat.config.contract import StageContract
from bat.config.stages import StageSpec

STAGES: tuple[StageSpec, ...] = tuple(StageSpec(**stage) for stage in declared.STAGES)
STAGE_KEYS: tuple[str, ...] = declared.STAGE_KEYS
LATE_STAGES: tuple[str, ...] = declared.LATE_STAGES
TRACKS: tuple[str, ...] = declared.TRACKS
CONTRACT: dict[str, StageContract] = {key: StageContract.model_validate(c) for key, c in declared.CONTRACT.items()}
