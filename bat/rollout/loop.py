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
from typing import Any

from bat.rollout.chat import TurnTokens
from bat.rollout.engine import Engine
from bat.rollout.live import LiveRollout
from bat.rollout.spec import LoopSettings, RolloutOutcome, RolloutSpec


def _generate(engine: Engine, members: Sequence[LiveRollout]) -> list[tuple[LiveRollout, dict[str, Any]]]:
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


def _drive_one(engine: Engine, live: LiveRollout, tools: threading.BoundedSemaphore) -> None:
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
    engine: Engine, lives: list[LiveRollout], tool_workers: int, on_step: Callable[[int, int], None] | None
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
    lives = [LiveRollout(spec, settings, tt) for spec in specs]
    if resolve_schedule(engine, settings.schedule) == "continuous":
        _run_continuous(engine, lives, settings.tool_workers, on_step)
        return _finish(engine, lives)
    n = max(1, min(settings.cohorts, len(lives)))
    cohorts = [lives[i::n] for i in range(n)]
    with ThreadPoolExecutor(max_workers=settings.tool_workers, thread_name_prefix="bat-tool") as pool:
        list(pool.map(lambda live: live.start(), lives))
        pending: dict[int, list[tuple[LiveRollout, Future]]] = {}
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


def _finish(engine: Engine, lives: list[LiveRollout]) -> list[RolloutOutcome]:
    """Release every rollout's engine cache and build the outcomes (in spec order)."""
    release = getattr(engine, "release", None)
    if release is not None:
        for live in lives:
            release(live.spec.rollout_id)
    return [live.to_record(engine) for live in lives]
