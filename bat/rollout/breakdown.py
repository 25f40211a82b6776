"""Failure breakdown of agent runs: classify every turn, find where each run stalled, count over runs.

Reads turn records (`bat.schemas.rollout.TurnRecord`: generated text, parsed call or invalid action, observation,
execution record with its stage tag) and the text the agent saw before its first turn; writes nothing. Used by
evaluations (held-out transcripts, aggregate counts) and rollout shards (`breakdown.json`), and printed by
`bat evaluate explain`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import PurePosixPath
from typing import Any

from bat.schemas.breakdown import (
    FINISHED,
    STAGE_DONE,
    TURN_KINDS,
    FailureSummary,
    RunBreakdown,
    Transcript,
    TurnVerdict,
)
from bat.schemas.rollout import TurnRecord

CURRENT_STAGE_TOOLS = ("list_files", "read_file", "execute_code")
"""Tools tagged with the stage the run is already in (they never advance it nor come too early)."""
READ_ONLY_TOOLS = ("list_files", "read_file", "check_compatibility", "check_outputs")
"""Tools that change nothing: calling one again before anything changed gives the same answer."""
NAME_ARGUMENTS = ("path", "model", "package", "cases")
"""Call arguments that name something in the workspace (checked against what the agent has seen)."""
WORKSPACE_PREFIXES = ("/workspace/", "./")
ALL_CASES = "all"


def opening_text(messages: Sequence[dict[str, Any]] | None, tools: Sequence[dict[str, Any]] | None = None) -> str:
    """Everything the agent could read before its first turn: the opening messages and the rendered tool list."""
    parts = [str(m.get("content", "")) for m in messages or []]
    if tools:
        parts.append(json.dumps(list(tools)))
    return "\n".join(parts)


def _names(arguments: dict[str, Any]) -> list[str]:
    """Identifier-like values of a call's arguments: path components (and their stems), models, packages, cases."""
    out: list[str] = []
    for key in NAME_ARGUMENTS:
        value = arguments.get(key)
        if key == "path" and isinstance(value, str):
            path = value
            for prefix in WORKSPACE_PREFIXES:
                path = path.removeprefix(prefix)
            out += [part for part in PurePosixPath(path).parts if part not in ("", ".", "/")]
        elif key == "cases" and isinstance(value, list):
            out += [str(v) for v in value if str(v) != ALL_CASES]
        elif isinstance(value, str) and value:
            out.append(value)
    return out


def _unseen(names: Iterable[str], seen: str) -> str | None:
    """The first name that occurs nowhere in `seen` (a path component also counts as seen by its stem)."""
    for name in names:
        if name in seen or PurePosixPath(name).stem in seen:
            continue
        return name
    return None


def _call_key(call: dict[str, Any]) -> str:
    return json.dumps({"name": call.get("name"), "arguments": call.get("arguments", {})}, sort_keys=True)


class _Walk:
    """State carried through one run's turns while classifying them."""

    def __init__(self, seen: str, stages: Sequence[str], start_stage: str | None) -> None:
        self.seen = seen
        self.stages = list(stages)
        self.reached = self.stages.index(start_stage) - 1 if start_stage in self.stages else -1
        self.calls: dict[str, tuple[str | None, int]] = {}
        """Call -> (its observation, the epoch after it); the epoch counts successful calls that changed state."""
        self.epoch = 0
        self.submitted = False

    def stage_index(self, stage: str | None) -> int | None:
        return self.stages.index(stage) if stage in self.stages else None

    def verdict(self, turn: TurnRecord) -> TurnVerdict:
        record = turn.record or {}
        stage = record.get("stage")
        kind, detail, tool = self._classify(turn, record)
        if kind == "ok" and tool not in READ_ONLY_TOOLS:
            self.epoch += 1
        if turn.call is not None:
            self.calls[_call_key(turn.call)] = (turn.observation, self.epoch)
        if turn.observation is not None:
            self.seen += "\n" + turn.observation
        if kind == "ok" and tool not in CURRENT_STAGE_TOOLS:
            index = self.stage_index(stage)
            if index is not None:
                self.reached = max(self.reached, index)
            self.submitted = self.submitted or (tool == "submit")
        return TurnVerdict(index=turn.index, kind=kind, detail=detail[:300], tool=tool, stage=stage)

    def _classify(self, turn: TurnRecord, record: dict[str, Any]) -> tuple[str, str, str | None]:
        if turn.invalid is not None:
            reason = str(turn.invalid.get("reason", "invalid"))
            return ("unknown_tool" if reason == "unknown_tool" else "malformed"), reason, None
        if turn.call is None:
            return "no_call", turn.response_text.strip()[:120], None
        tool = str(turn.call.get("name"))
        error = str(record.get("error") or "")
        if record.get("tool") == "<invalid>":
            kind = "unknown_tool" if error.startswith("unknown tool") else "invalid_arguments"
            return kind, error, tool
        missing = _unseen(_names(turn.call.get("arguments") or {}), self.seen)
        if missing is not None:
            return "unseen_name", missing, tool
        if self.calls.get(_call_key(turn.call)) == (turn.observation, self.epoch):
            return "repeat", "", tool
        index = self.stage_index(record.get("stage"))
        if tool not in CURRENT_STAGE_TOOLS and index is not None and index > self.reached + 1:
            return "too_early", f"{record.get('stage')} after {self._reached_name()}", tool
        if not record.get("ok", False):
            return "tool_error", error, tool
        return "ok", "", tool

    def _reached_name(self) -> str:
        return self.stages[self.reached] if self.reached >= 0 else "nothing"

    def stalled(self) -> str:
        if self.submitted:
            return FINISHED
        return self.stages[min(self.reached + 1, len(self.stages) - 1)] if self.stages else ""


def analyse_run(
    run_id: str,
    turns: Sequence[TurnRecord],
    end_reason: str,
    seen: str,
    stages: Sequence[str],
    *,
    track: str = "",
    start_stage: str | None = None,
) -> RunBreakdown:
    """Classify each turn of one run (see `bat.schemas.breakdown.TURN_KINDS`) given `seen`, the text the agent had
    before its first turn; `start_stage` is the stage a mid-workflow state opens in (earlier stages count as done).
    The run stalled at the first stage after the furthest stage it completed a stage call of; a stage row ended at
    its stage exit (`end_reason` `stage_exit`) did not stall (`STAGE_DONE`)."""
    walk = _Walk(seen, stages, start_stage)
    verdicts = [walk.verdict(turn) for turn in turns]
    first = next((v.index for v in verdicts if v.kind != "ok"), None)
    stalled = STAGE_DONE if end_reason == "stage_exit" else walk.stalled()
    return RunBreakdown(
        run_id=run_id, track=track, end_reason=end_reason, stalled=stalled, turns=verdicts, first_failure=first
    )


def transcript_of(
    run_id: str,
    track: str,
    end_reason: str,
    opening: Sequence[dict[str, Any]],
    turns: Sequence[TurnRecord],
    stages: Sequence[str],
    tools: Sequence[dict[str, Any]] | None = None,
    start_stage: str | None = None,
) -> Transcript:
    """A run's transcript with its breakdown (opening = the system/user messages it started from)."""
    opening = [{"role": str(m.get("role")), "content": str(m.get("content", ""))} for m in opening]
    breakdown = analyse_run(
        run_id, turns, end_reason, opening_text(opening, tools), stages, track=track, start_stage=start_stage
    )
    return Transcript(
        run_id=run_id, track=track, end_reason=end_reason, opening=opening, turns=list(turns), breakdown=breakdown
    )


def _kind_label(verdict: TurnVerdict) -> str:
    return f"malformed:{verdict.detail}" if verdict.kind == "malformed" else verdict.kind


def summarise(breakdowns: Sequence[RunBreakdown]) -> FailureSummary:
    """Counts over runs: end reasons, stalled stages, turn kinds (malformed by parser reason), runs with each kind,
    and the kind of each run's first failure."""
    kinds: Counter[str] = Counter()
    runs_with: Counter[str] = Counter()
    first: Counter[str] = Counter()
    for b in breakdowns:
        labels = [_kind_label(v) for v in b.turns]
        kinds.update(labels)
        runs_with.update(set(labels))
        failing = [label for label in labels if label != "ok"]
        if failing:
            first[failing[0]] += 1
    return FailureSummary(
        runs=len(breakdowns),
        turns=sum(len(b.turns) for b in breakdowns),
        end_reasons=dict(sorted(Counter(b.end_reason for b in breakdowns).items())),
        stalled=dict(sorted(Counter(b.stalled for b in breakdowns).items())),
        turn_kinds=dict(sorted(kinds.items())),
        runs_with=dict(sorted(runs_with.items())),
        first_failures=dict(sorted(first.items())),
    )


def _ordered_kinds(counts: dict[str, int]) -> list[str]:
    base = {k: i for i, k in enumerate(TURN_KINDS)}
    return sorted(counts, key=lambda k: (base.get(k.split(":")[0], len(base)), k))


def format_summary(summary: FailureSummary, title: str = "Failure breakdown") -> str:
    """Markdown tables of a summary: where runs ended and stalled, and what their turns did."""
    n, t = summary.runs, summary.turns
    lines = [f"### {title} ({n} runs, {t} turns)", ""]
    lines += ["| run ended by | runs |", "|---|---|"]
    lines += [f"| {reason} | {count} |" for reason, count in summary.end_reasons.items()]
    lines += ["", "| stalled at | runs |", "|---|---|"]
    lines += [f"| {stage} | {count} |" for stage, count in summary.stalled.items()]
    lines += [
        "",
        "| turn kind | turns | share of turns | runs with it | first failure of runs |",
        "|---|---|---|---|---|",
    ]
    for kind in _ordered_kinds(summary.turn_kinds):
        count = summary.turn_kinds[kind]
        share = f"{100.0 * count / t:.1f} %" if t else "-"
        lines.append(
            f"| {kind} | {count} | {share} | {summary.runs_with.get(kind, 0)} | {summary.first_failures.get(kind, 0)} |"
        )
    return "\n".join(lines) + "\n"


def format_transcript(transcript: Transcript, max_chars: int = 600) -> str:
    """One run turn by turn: the verdict, what the agent wrote, and the observation (each cut to `max_chars`)."""

    def cut(text: str) -> str:
        text = text.rstrip()
        return text if len(text) <= max_chars else text[:max_chars] + f" ...[{len(text) - max_chars} more chars]"

    b = transcript.breakdown
    head = f"# Run {transcript.run_id} ({transcript.track}): ended by {transcript.end_reason}"
    lines = [head + (f", stalled at {b.stalled}" if b else ""), ""]
    for m in transcript.opening:
        lines += [f"## opening: {m['role']} ({len(m['content'])} chars)", cut(m["content"]), ""]
    verdicts = {v.index: v for v in (b.turns if b else [])}
    for turn in transcript.turns:
        v = verdicts.get(turn.index)
        stage = (turn.record or {}).get("stage") or "-"
        label = f"{v.kind}{f' ({v.detail})' if v and v.detail else ''}" if v else "-"
        lines += [f"## turn {turn.index} [{stage}] {label}", "assistant:", cut(turn.response_text)]
        if turn.observation is not None:
            lines += ["observation:", cut(turn.observation)]
        lines.append("")
    return "\n".join(lines)
