"""One rollout in flight: its token ids, loss mask and behavior log-probs as they grow, the turn records, the budget
use, and the end of the episode (by budget, environment, parse policy or stage exit). Driven by `bat.rollout.loop`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bat.config.rollout import RolloutBudgets
from bat.policy.codec import InvalidAction, parse_tool_call
from bat.rollout import budgets as B
from bat.rollout.chat import TurnTokens
from bat.rollout.engine import Engine, GenRequest, GenResult
from bat.rollout.spec import LoopSettings, RolloutOutcome, RolloutSpec
from bat.rollout.workspace import diff, snapshot, split_volatile
from bat.schemas.bank import E2E
from bat.schemas.rollout import RolloutRecord, Segment, TurnRecord
from bat.seeds import derive_seed


def row_budgets(settings: LoopSettings, stage: str) -> RolloutBudgets:
    """`settings.budgets`, with turns and tool calls capped at `settings.stage_row_turns` for a stage row."""
    cap = settings.stage_row_turns
    b = settings.budgets
    if cap is None or stage == E2E:
        return b
    return b.model_copy(
        update={"max_assistant_turns": min(cap, b.max_assistant_turns), "max_tool_calls": min(cap, b.max_tool_calls)}
    )


class LiveRollout:
    """Mutable state of one rollout in flight."""

    def __init__(self, spec: RolloutSpec, settings: LoopSettings, tt: TurnTokens) -> None:
        self.spec, self.settings, self.tt = spec, settings, tt
        self.budgets = row_budgets(settings, spec.stage)
        """The budgets this rollout runs under (a stage row's turn cap applied)."""
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
        b = self.budgets
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
        b = self.budgets
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
        shown, truncated, reason = B.cap_observation(self.budgets, text)
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
        if len(self.ids) + len(cont) >= self.budgets.max_context_tokens:
            self.finish("context_length")
            return
        self._append("observation", cont)

    def _end_at_stage_exit(self) -> bool:
        """Ask a stage row's settled check (only with `settings.stage_exit`, never for E2E, not when no call is left)
        and end the rollout with `stage_exit` when it holds; a check that fails ends it as an infrastructure failure
        (`error`, the rollout is invalid). Returns whether the rollout ended here."""
        check = self.spec.stage_exit
        left = B.calls_left(self.budgets, self.use)
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
