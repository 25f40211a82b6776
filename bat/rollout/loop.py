"""The multi-turn agent loop: many rollouts in flight, batched generation, tool calls in parallel threads.

Two schedules (`LoopSettings.schedule`):
* cohorts (deterministic): rollouts form fixed cohorts; each cohort in turn gets one batched generation
  step and its tool calls go to a thread pool, where they run while the next cohort generates (one cohort
  = lockstep). Nothing depends on timing, so a rerun reproduces every token.
* continuous: every rollout runs on its own thread (generate one turn, run its tool call, generate the
  next) against an engine that batches concurrent requests itself (`Engine.concurrent`, e.g. a vLLM
  server): a rollout waiting on its sandbox never holds back the others, and the engine's batch is
  refilled as soon as any rollout is ready. Each rollout's tokens still depend only on its own seed.
Token in, token out: ids are only ever appended (prompt, generated, template+observation deltas).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bat.config.rollout import RolloutBudgets
from bat.policy.codec import InvalidAction, parse_tool_call
from bat.rollout import budgets as B
from bat.rollout.chat import TurnTokens
from bat.rollout.engine import Engine, GenRequest, GenResult
from bat.rollout.workspace import diff, snapshot, split_volatile
from bat.schemas.bank import E2E
from bat.schemas.rollout import RolloutRecord, Segment, TurnRecord
from bat.seeds import derive_seed


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
    stage_exit: bool = False
    """Ask each stage row's `RolloutSpec.stage_exit` check and end the rollout once it holds (`rollout.stage_exit`
    of training rounds with the rubric reward); False (evaluation) never cuts a run. E2E rows are never cut."""


@dataclass
class RolloutOutcome:
    """A finished rollout: its record and the volatile timings kept out of the record."""

    record: RolloutRecord
    timings: list[dict[str, Any]] = field(default_factory=list)


class _Live:
    """Mutable state of one rollout in flight."""

    def __init__(self, spec: RolloutSpec, settings: LoopSettings, tt: TurnTokens) -> None:
        self.spec, self.settings, self.tt = spec, settings, tt
        self.ids: list[int] = []
        self.mask: list[int] = []
        self.logps: list[float] = []
        self.segments: list[Segment] = []
        self.turns: list[TurnRecord] = []
        self.timings: list[dict[str, Any]] = []
        self.use = B.BudgetUse()
        self.end_reason: str | None = None
        self.invalid_reason: str | None = None
        self.prompt_len = 0
        self.initial_files: dict[str, str] = {}
        self._pending: dict[str, Any] = {}
        self._last_generated: list[int] = []

    # -- token bookkeeping -------------------------------------------------
    def _append(self, kind: str, ids: Sequence[int], logps: Sequence[float] | None = None) -> None:
        if not ids:
            return
        start = len(self.ids)
        self.ids.extend(int(i) for i in ids)
        self.mask.extend([1 if kind == "generated" else 0] * len(ids))
        self.logps.extend([float(x) for x in logps] if logps is not None else [0.0] * len(ids))
        self.segments.append(Segment(kind=kind, start=start, end=len(self.ids)))

    def finish(self, reason: str, invalid: str | None = None) -> None:
        """End the rollout (first reason wins); `invalid` marks an infrastructure failure."""
        if self.end_reason is None:
            self.end_reason = reason
            self.invalid_reason = invalid

    # -- phases of a turn ----------------------------------------------------
    def start(self) -> None:
        """Reset the environment and tokenize the opening messages."""
        try:
            brief = self.spec.env.reset()
        except Exception as exc:  # infrastructure: the sandbox did not boot
            self._append("prompt", self.tt.prompt_ids([{"role": "user", "content": ""}]))
            self.prompt_len = len(self.ids)
            self.finish("error", f"env.reset failed: {type(exc).__name__}: {exc}")
            return
        self.initial_files, _ = diff(self.spec.workspace, {}, snapshot(self.spec.workspace))
        messages = self.spec.messages or [{"role": "user", "content": brief}]
        self._append("prompt", self.tt.prompt_ids(messages))
        self.prompt_len = len(self.ids)

    def request(self) -> GenRequest | None:
        """The next generation request, or None when a budget ends the rollout first."""
        b = self.settings.budgets
        reason = B.before_turn(b, self.use, len(self.ids))
        limit = B.turn_token_limit(b, self.use, len(self.ids))
        if reason is None and limit <= 0:
            reason = "context_length"
        if reason:
            self.finish(reason)
            return None
        seed = derive_seed(self.spec.seed, "turn", self.use.turns)
        return GenRequest(
            prompt_ids=list(self.ids),
            max_new_tokens=limit,
            seed=seed,
            temperature=self.settings.temperature,
            stop_ids=self.tt.stop_ids,
            cache_key=self.spec.rollout_id,
        )

    def absorb(self, res: GenResult) -> dict[str, Any] | None:
        """Append a generated turn; returns the action to send to the environment, or None if ended."""
        if res.error:
            self.finish("error", f"engine: {res.error}")
            return None
        self._append("generated", res.token_ids, res.logprobs)
        self._last_generated = list(res.token_ids)
        self.use.turns += 1
        self.use.response_tokens += len(res.token_ids)
        text = self.tt.decode(res.token_ids)
        self._pending = {
            "index": len(self.turns),
            "response_text": text,
            "generated_tokens": len(res.token_ids),
            "finish": res.finish,
        }
        b = self.settings.budgets
        if res.finish == "length":
            reason = B.after_cut_turn(b, self.use, len(self.ids))
            if reason:
                return self._close_turn(reason)
        parsed = parse_tool_call(text, self.settings.tool_names)
        if (
            isinstance(parsed, InvalidAction)
            and parsed.reason == "no_tool_call"
            and self.settings.no_tool_call == "end"
        ):
            return self._close_turn("no_tool_call")
        reason = B.before_action(b, self.use)
        if reason:
            return self._close_turn(reason)
        self.use.tool_calls += 1
        if isinstance(parsed, InvalidAction):
            action = parsed.as_dict()
            self._pending["invalid"] = action
        else:
            action = parsed.as_dict()
            self._pending["call"] = action
        return action

    def _close_turn(self, reason: str) -> None:
        """Record the pending turn without an action and end the rollout."""
        self.turns.append(TurnRecord(**self._pending))
        self.finish(reason)
        return None

    def act(self, action: dict[str, Any]) -> tuple[Any, dict[str, str], list[str]] | BaseException:
        """Run one action in the environment (called from a worker thread)."""
        ws = self.spec.workspace
        try:
            before = snapshot(ws)
            obs = self.spec.env.step(action)
            written, deleted = diff(ws, before, snapshot(ws))
            return obs, written, deleted
        except Exception as exc:
            return exc

    def observe(self, outcome: tuple[Any, dict[str, str], list[str]] | BaseException) -> None:
        """Record the observation and append its tokens (or end the rollout)."""
        if isinstance(outcome, BaseException):
            self.turns.append(TurnRecord(**self._pending))
            self.finish("error", f"env.step failed: {type(outcome).__name__}: {outcome}")
            return
        obs, written, deleted = outcome
        text = str(getattr(obs, "text", obs))
        shown, truncated, reason = B.cap_observation(self.settings.budgets, text)
        record, timing = split_volatile(getattr(obs, "record", None))
        self.timings.append({"turn": len(self.turns), **timing})
        done = bool(getattr(obs, "done", False))
        self.turns.append(
            TurnRecord(
                **self._pending,
                observation=shown,
                observation_chars=len(text),
                observation_truncated=truncated,
                record=record,
                files_written=written,
                files_deleted=deleted,
                env_done=done,
            )
        )
        if done:
            self.finish("done")
            return
        if reason:
            self.finish(reason)
            return
        if self._end_at_stage_exit():
            return
        call = self._pending.get("call")
        cont = self.tt.continuation_ids(self._last_generated, shown, call["name"] if call else None)
        if len(self.ids) + len(cont) >= self.settings.budgets.max_context_tokens:
            self.finish("context_length")
            return
        self._append("observation", cont)

    def _end_at_stage_exit(self) -> bool:
        """Ask a stage row's settled check (only with `settings.stage_exit`, never for E2E, not when no call is left)
        and end the rollout with `stage_exit` when it holds; a check that fails ends it as an infrastructure failure
        (`error`, the rollout is invalid). Returns whether the rollout ended here."""
        check = self.spec.stage_exit
        left = B.calls_left(self.settings.budgets, self.use)
        if not self.settings.stage_exit or check is None or self.spec.stage == E2E or left == 0:
            return False  # with no call left a budget ends the rollout anyway; nothing would be saved
        try:
            settled = bool(check(left))
        except Exception as exc:
            self.finish("error", f"stage_exit check failed: {type(exc).__name__}: {exc}")
            return True
        if settled:
            self.finish("stage_exit")
        return settled

    def to_record(self, engine: Engine) -> RolloutOutcome:
        s = self.spec
        rec = RolloutRecord(
            rollout_id=s.rollout_id,
            state_id=s.state_id,
            round=s.round,
            shard=s.shard,
            k=s.k,
            pool=s.pool,
            stage=s.stage,
            seed=s.seed,
            engine=engine.name,
            checkpoint=engine.checkpoint,
            temperature=self.settings.temperature,
            token_ids=self.ids,
            loss_mask=self.mask,
            behavior_logprobs=self.logps,
            prompt_len=self.prompt_len,
            segments=self.segments,
            turns=self.turns,
            tool_calls=self.use.tool_calls,
            response_tokens=self.use.response_tokens,
            end_reason=self.end_reason or "error",
            initial_files=self.initial_files,
            valid=self.invalid_reason is None,
            invalid_reason=self.invalid_reason,
        )
        return RolloutOutcome(record=rec, timings=self.timings)


def _generate(engine: Engine, members: Sequence[_Live]) -> list[tuple[_Live, dict[str, Any]]]:
    """One batched generation step for the live members; returns (rollout, action) pairs to execute."""
    ready = [(live, req) for live in members if live.end_reason is None for req in [live.request()] if req is not None]
    if not ready:
        return []
    try:
        results = engine.generate([req for _, req in ready])
    except Exception as exc:  # the engine is down: every rollout of the batch is an infrastructure failure
        for live, _ in ready:
            live.finish("error", f"engine: {type(exc).__name__}: {exc}")
        return []
    return [
        (live, action) for (live, _), res in zip(ready, results) for action in [live.absorb(res)] if action is not None
    ]


SCHEDULES = ("auto", "cohorts", "continuous")


def resolve_schedule(engine: Engine, schedule: str) -> str:
    """`cohorts` or `continuous` for `engine`; raises ValueError for an unknown name or an engine that
    cannot take concurrent requests."""
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown rollout schedule {schedule!r}; valid: {list(SCHEDULES)}")
    concurrent = bool(getattr(engine, "concurrent", False))
    if schedule == "auto":
        return "continuous" if concurrent else "cohorts"
    if schedule == "continuous" and not concurrent:
        raise ValueError(
            f"rollout.schedule = 'continuous' needs an engine that batches concurrent requests "
            f"(vllm, openai); the {engine.name!r} engine runs with 'cohorts' or 'auto'"
        )
    return schedule


def _drive_one(engine: Engine, live: _Live, tools: threading.BoundedSemaphore) -> None:
    """Run one rollout to its end on the calling thread: generate a turn, run its action (at most
    `tool_workers` environments work at once, through `tools`), repeat."""
    with tools:
        live.start()
    while live.end_reason is None:
        req = live.request()
        if req is None:
            break
        try:
            res = engine.generate([req])[0]
        except Exception as exc:  # the engine is down: this rollout is an infrastructure failure
            live.finish("error", f"engine: {type(exc).__name__}: {exc}")
            break
        action = live.absorb(res)
        if action is None:
            break
        with tools:
            outcome = live.act(action)
        live.observe(outcome)


def _run_continuous(
    engine: Engine, lives: list[_Live], tool_workers: int, on_step: Callable[[int, int], None] | None
) -> None:
    """Every rollout on its own thread; `on_step(finished, live)` is called as rollouts end."""
    if not lives:
        return
    tools = threading.BoundedSemaphore(max(1, tool_workers))
    with ThreadPoolExecutor(max_workers=len(lives), thread_name_prefix="bat-rollout") as pool:
        futures = [pool.submit(_drive_one, engine, live, tools) for live in lives]
        for done, future in enumerate(futures, start=1):
            future.result()
            if on_step:
                on_step(done, sum(1 for live in lives if live.end_reason is None))


def run_rollouts(
    engine: Engine,
    specs: Sequence[RolloutSpec],
    tt: TurnTokens,
    settings: LoopSettings,
    on_step: Callable[[int, int], None] | None = None,
) -> list[RolloutOutcome]:
    """Drive every spec to its end; returns outcomes in the order of `specs`. Envs are not closed here.

    With the continuous schedule every rollout runs on its own thread against the (concurrent) engine.
    With cohorts, rollouts are split into `settings.cohorts` fixed groups (round-robin by position). Each group in turn
    collects its finished tool calls, then generates one batched step whose tool calls are submitted to the
    thread pool, so the sandboxes of one group run while the next group generates. Group membership and
    batch composition never depend on timing, so results are deterministic.
    """
    lives = [_Live(spec, settings, tt) for spec in specs]
    if resolve_schedule(engine, settings.schedule) == "continuous":
        _run_continuous(engine, lives, settings.tool_workers, on_step)
        return _finish(engine, lives)
    n = max(1, min(settings.cohorts, len(lives)))
    cohorts = [lives[i::n] for i in range(n)]
    with ThreadPoolExecutor(max_workers=settings.tool_workers, thread_name_prefix="bat-tool") as pool:
        list(pool.map(lambda live: live.start(), lives))
        pending: dict[int, list[tuple[_Live, Future]]] = {}
        step = 0
        while True:
            progressed = False
            for c, members in enumerate(cohorts):
                for live, future in pending.pop(c, []):
                    live.observe(future.result())
                acting = _generate(engine, members)
                if acting:
                    pending[c] = [(live, pool.submit(live.act, action)) for live, action in acting]
                    progressed = True
            if not progressed and not pending:
                break
            step += 1
            if on_step:
                on_step(step, sum(1 for live in lives if live.end_reason is None))
    return _finish(engine, lives)


def _finish(engine: Engine, lives: list[_Live]) -> list[RolloutOutcome]:
    """Release every rollout's engine cache and build the outcomes (in spec order)."""
    release = getattr(engine, "release", None)
    if release is not None:
        for live in lives:
            release(live.spec.rollout_id)
    return [live.to_record(engine) for live in lives]
