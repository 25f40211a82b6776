"""Stage sandbox states (Eq. 11): replay a teacher prefix in a fresh sandbox workspace and pack the result.

`replay_and_pack` runs the trajectory's calls once from a fresh instance workspace, packs the workspace at every
requested boundary b (= after executing turns[:b]) and checks that each replayed observation equals the
teacher's, so a stored state is exactly what the prefix produces. `replay_prefix` replays one prefix from
scratch (used to re-check a stored digest). The prefix's execution records are stored beside the package
(`prior_records.jsonl`) so an environment opened on the state grades the new stage with its upstream context.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.bank.states import pack_workspace
from bat.bank.teacher import alias_text, normalise_record
from bat.schemas.bank import TrajectoryTurn
from bat.state.bank_layout import PRIOR_RECORDS_NAME
from bat.state.jsonl import write_jsonl

if TYPE_CHECKING:
    from bat.config.root import BatConfig

PRIOR_RECORDS = PRIOR_RECORDS_NAME


class ReplayMismatchError(RuntimeError):
    """A replayed call produced a different observation than the teacher saw (non-deterministic tool)."""


def action_of(turn: TrajectoryTurn, offered: Sequence[str]) -> dict[str, Any]:
    """The action a turn took: its parsed call, or the invalid-action record its response parses to."""
    if turn.call is not None:
        return turn.call
    from bat.policy.codec import parse_tool_call

    return parse_tool_call(turn.response, offered).as_dict()


def _env(instance: Any, workdir: Path, config: BatConfig) -> tuple[Any, Path, Path]:
    from bat.benchmark.bank_side import open_instance

    workdir = Path(workdir)
    if workdir.exists():
        shutil.rmtree(workdir)
    workspace, grader = (workdir / "ws").resolve(), (workdir / "grader").resolve()
    env = open_instance(instance, workspace, grader, config)
    env.reset()
    return env, workspace, grader


def replay_prefix(
    instance: Any, turns: Sequence[TrajectoryTurn], upto: int, workdir: Path, config: BatConfig
) -> tuple[Path, list[dict[str, Any]]]:
    """Execute the calls of turns[:upto] in a fresh workspace under `workdir`; returns (workspace, normalised records)."""
    env, workspace, grader = _env(instance, workdir, config)
    for turn in turns[:upto]:
        env.step(action_of(turn, env.offered))
    return workspace, [normalise_record(r, workspace, grader) for r in env.records]


def replay_and_pack(
    instance: Any,
    turns: Sequence[TrajectoryTurn],
    boundaries: Mapping[str, int],
    workdir: Path,
    config: BatConfig,
    dest_for: Mapping[str, Path],
    metadata_for: Mapping[str, dict[str, Any]],
) -> dict[str, Any]:
    """One replay pass; at each boundary `key -> b` pack the workspace into `dest_for[key]` and write the prefix
    records beside it. Returns key -> PackageManifest. Raises ReplayMismatchError on a diverging observation."""
    env, workspace, grader = _env(instance, workdir, config)
    by_turn: dict[int, list[str]] = {}
    for key, b in boundaries.items():
        if not 0 <= b <= len(turns):
            raise ValueError(f"boundary {key}={b} outside the trajectory (0..{len(turns)})")
        by_turn.setdefault(b, []).append(key)
    out: dict[str, Any] = {}
    last = max(boundaries.values(), default=0)
    for t in range(last + 1):
        for key in sorted(by_turn.get(t, [])):
            meta = {**metadata_for.get(key, {}), "prefix_turns": t}
            out[key] = pack_workspace(workspace, dest_for[key], meta)
            write_jsonl(
                Path(dest_for[key]) / PRIOR_RECORDS, [normalise_record(r, workspace, grader) for r in env.records]
            )
        if t == last:
            break
        turn = turns[t]
        obs = env.step(action_of(turn, env.offered))
        seen = alias_text(obs.text, workspace, grader)
        if seen != turn.observation:
            raise ReplayMismatchError(
                f"replay of turn {t} ({turn.call and turn.call.get('name')}) diverged from the teacher's observation:\n"
                f"teacher: {turn.observation[:300]!r}\nreplay:  {seen[:300]!r}"
            )
    return out
