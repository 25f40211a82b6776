"""What the agent loop is given and returns: the environment protocol, one rollout's spec, the loop's knobs and a
finished rollout's outcome (`bat.rollout.loop` runs them, `bat.rollout.live` holds one in flight)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bat.config.rollout import RolloutBudgets
from bat.schemas.rollout import RolloutRecord


class Env(Protocol):
    """What the loop drives (satisfied by `bat.benchmark.StagedEnv`)."""

    def reset(self) -> str: ...

    def step(self, call: dict[str, Any]) -> Any:
        """Returns an observation with `.text`, `.record`, `.done`."""
        ...


@dataclass
class RolloutSpec:
    """One rollout to run: identity, seed, the environment, the opening messages and its workspace."""

    rollout_id: str
    state_id: str
    k: int
    seed: int
    env: Env
    messages: list[dict[str, Any]] | None = None
    """Opening system/user messages; None = a single user message holding `env.reset()`'s text."""
    workspace: Path | None = None
    round: int = 0
    shard: int = 0
    pool: str = "E2E"
    stage: str = "E2E"
    stage_exit: Callable[[int], bool] | None = None
    """A stage row's settled check (`LoopSettings.stage_exit`): called after every observation with the most
    environment calls the budgets still allow; True = nothing that follows can change the row's reward, and the
    rollout ends with `stage_exit`. None (evaluation, E2E rows) = never asked."""


@dataclass
class LoopSettings:
    """Loop knobs (from `RolloutConfig`)."""

    budgets: RolloutBudgets
    temperature: float = 0.7
    no_tool_call: str = "end"
    tool_workers: int = 4
    tool_names: Sequence[str] | None = None
    cohorts: int = 1
    """Fixed groups generated in turn so tool calls of one overlap generation of the next (1 = lockstep)."""
    schedule: str = "auto"
    """`cohorts`, `continuous` (needs an engine with `concurrent = True`) or `auto` (continuous where the
    engine allows it)."""
    stage_row_turns: int | None = None
    """Assistant turns and tool calls a stage row (not E2E) may take, below `budgets` (`rollout.stage_row_turns`);
    None = `budgets` alone."""
    stage_exit: bool = False
    """Ask each stage row's `RolloutSpec.stage_exit` check and end the rollout once it holds (`rollout.stage_exit`
    of training rounds with the rubric reward); False (evaluation) never cuts a run. E2E rows are never cut."""


@dataclass
class RolloutOutcome:
    """A finished rollout: its record and the volatile timings kept out of the record."""

    record: RolloutRecord
    timings: list[dict[str, Any]] = field(default_factory=list)
