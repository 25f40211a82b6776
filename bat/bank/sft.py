"""SFT slices (Eq. 9): one row per teacher response; context = task, stage skill, earlier turns + observations.

Loss only on the target (Eq. 10). Rows longer than the limit are rejected and counted, never clipped.
The train/validation split is grouped by trajectory so no trajectory feeds both sides.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from bat.benchmark import prompts
from bat.schemas.bank import E2E, ChatMessage, LossMaskSpec, SftRow, Trajectory


class LengthMeter(Protocol):
    unit: str

    def measure(self, messages: Sequence[ChatMessage], target: str) -> int:
        """Length of context + target in `unit`."""
        ...


@dataclass(frozen=True)
class ApproxLengthMeter:
    """Approximate tokens = ceil(characters / chars_per_token) when no tokenizer is configured."""

    chars_per_token: float = 3.0
    unit: str = "approx_tokens"

    def measure(self, messages: Sequence[ChatMessage], target: str) -> int:
        chars = sum(len(m.content) for m in messages) + len(target)
        return max(1, math.ceil(chars / self.chars_per_token))


@dataclass(frozen=True)
class TokenLengthMeter:
    """Exact length: the ids the SFT trainer will feed (chat template with `tools`, default the benchmark's)."""

    tokenizer: Any
    tools: Sequence[dict[str, Any]] | None = None
    unit: str = "tokens"

    def measure(self, messages: Sequence[ChatMessage], target: str) -> int:
        from bat.policy.chat import encode_messages

        tools = self.tools
        if tools is None:
            from bat.benchmark import TOOL_SPECS

            tools = TOOL_SPECS
        row_messages = prompts.to_dicts([*messages, ChatMessage(role="assistant", content=target)])
        ids, _ = encode_messages(self.tokenizer, row_messages, tools)
        return len(ids)


@dataclass
class SliceStats:
    """Counts of one slicing pass: kept rows and rejected overlong rows by stage."""

    kept: Counter = field(default_factory=Counter)
    overlong: Counter = field(default_factory=Counter)
    flawed: int = 0
    """Responses left out as targets because they were the mistake a recovery run then fixed."""
    max_length: int = 0
    unit: str = "approx_tokens"

    def as_dict(self) -> dict[str, Any]:
        return {
            "kept": sum(self.kept.values()),
            "kept_by_stage": dict(sorted(self.kept.items())),
            "overlong": sum(self.overlong.values()),
            "overlong_by_stage": dict(sorted(self.overlong.items())),
            "skipped_flawed": self.flawed,
            "limit": self.max_length,
            "unit": self.unit,
        }


def split_by_trajectory(trajectory_ids: Sequence[str], validation_fraction: float, seed: int) -> dict[str, str]:
    """Assign whole trajectories to train/validation: a seeded shuffle, round(fraction * n) to validation
    (at least one when fraction > 0 and there are two or more trajectories)."""
    ids = sorted(set(trajectory_ids))
    random.Random(seed).shuffle(ids)
    n_val = round(validation_fraction * len(ids))
    if validation_fraction > 0 and len(ids) >= 2:
        n_val = max(1, n_val)
    n_val = min(n_val, len(ids) - 1) if len(ids) > 1 else 0
    return {tid: ("validation" if i < n_val else "train") for i, tid in enumerate(ids)}


def slice_trajectory(
    traj: Trajectory,
    *,
    skills: Mapping[str, str],
    stage_order: Sequence[str],
    meter: LengthMeter,
    max_length: int,
    split: str,
    stats: SliceStats,
    stage_names: Mapping[str, str] | None = None,
    e2e: bool = False,
    skip: Collection[int] = (),
    agent_context: bool = False,
    preamble: str = prompts.PREAMBLE,
) -> list[SftRow]:
    """Rows (h_t, a_t) for every valid teacher response of `traj`; overlong rows are counted in `stats`.

    Turns whose response is not a valid tool call are skipped (the teacher never trains an invalid action), and
    so are the turns in `skip` (a recovery run's mistaken pilot); both stay in the history of later rows.
    `e2e` rows attach the ordered skills of every stage and are keyed `E2E`; with `agent_context` stage rows
    attach them too (the agent's opening, `bank.sft_context: agent`) and keep their stage key. `preamble` opens
    the system turn (default: the built-in benchmark's agent).
    """
    stats.max_length, stats.unit = max_length, meter.unit
    brief = prompts.user_message(traj.brief)
    rows: list[SftRow] = []
    for index, turn in enumerate(traj.turns):
        if turn.call is None:
            continue
        if turn.t in skip:
            stats.flawed += 1
            continue
        key = E2E if e2e else turn.stage
        skill = (
            prompts.e2e_skill_text(stage_order, skills, stage_names)
            if e2e or agent_context
            else prompts.skill_text(turn.stage, skills, stage_names)
        )
        messages = [prompts.system_message(skill, preamble), brief, *prompts.history_messages(traj.turns[:index])]
        length = meter.measure(messages, turn.response)
        if length > max_length:
            stats.overlong[key] += 1
            continue
        stats.kept[key] += 1
        rows.append(
            SftRow(
                row_id=f"{traj.trajectory_id}.t{turn.t:03d}",
                trajectory_id=traj.trajectory_id,
                task_id=traj.task.task_id,
                track=traj.task.track,
                stage=key,
                outcome=traj.outcome,
                turn=turn.t,
                messages=messages,
                target=turn.response,
                loss_mask=LossMaskSpec(context_messages=len(messages)),
                length=length,
                length_unit=meter.unit,  # type: ignore[arg-type]
                split=split,  # type: ignore[arg-type]
            )
        )
    return rows


def slice_trajectories(
    use: Sequence[Trajectory],
    *,
    split_seed: int,
    validation_fraction: float,
    e2e_ids: Collection[str],
    recovery_skip: Callable[[Trajectory], Collection[int]],
    **slicing: Any,
) -> tuple[list[SftRow], SliceStats]:
    """SFT rows of every trajectory of `use`, each whole trajectory assigned to train or validation by `split_seed`
    (`split_by_trajectory`); a recovery run skips the turns `recovery_skip` names, a trajectory in `e2e_ids` is
    sliced as an E2E row; `slicing` holds the remaining `slice_trajectory` arguments. Returns the rows and the
    counts of kept and rejected rows."""
    splits = split_by_trajectory([t.trajectory_id for t in use], validation_fraction, split_seed)
    stats, rows = SliceStats(), []
    for traj in use:
        rows += slice_trajectory(
            traj,
            split=splits[traj.trajectory_id],
            stats=stats,
            e2e=traj.trajectory_id in e2e_ids,
            skip=recovery_skip(traj) if traj.outcome == "recovery" else (),
            **slicing,
        )
    return rows, stats


def tokenize_sft_row(
    row: SftRow, tokenizer: Any, tools: Sequence[dict[str, Any]] | None = None
) -> tuple[list[int], list[int]]:
    """Token ids and loss mask of a row through the policy's chat template: mask = 1 exactly on the
    target response's tokens (and its end-of-turn token), 0 on every context token.

    `tools` defaults to the benchmark's `TOOL_SPECS` — the tool list the rollout renders too, so SFT and RL see
    the same prompt; pass `[]` to render without a tool list."""
    from bat.policy.chat import encode_messages

    if tools is None:
        from bat.benchmark import TOOL_SPECS

        tools = TOOL_SPECS
    messages = prompts.to_dicts([*row.messages, ChatMessage(role="assistant", content=row.target)])
    return encode_messages(tokenizer, messages, tools)
