"""`StagedEnv`: one episode on one instance — reset() -> brief, step(call) -> Observation, score() -> RunScore.

Every call (valid, malformed or over budget) becomes an `ExecutionRecord` with a stage tag; malformed calls
give an error observation and never raise. Stage tags: write_plan S1; setup tools S2; run_model on
<= pilot_max cases before any batch run S3, otherwise S4; check_outputs S3 before the batch, S4 after;
submit S5; list/read/execute_code take the current stage.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bat.benchmark import workspace_files as wf
from bat.benchmark.instance import Instance, materialize
from bat.benchmark.runtime import Runner, make_runner
from bat.benchmark.tools.specs import TOOL_BY_NAME, TOOL_BY_REF, TOOL_NAMES, validate_call
from bat.sandbox.record import ExecutionRecord

STAGE_ORDER = ("S1", "S2", "S3", "S4", "S5")


@dataclass
class Observation:
    """What the agent sees after a call, the call's execution record, and whether the episode ended."""

    text: str
    record: ExecutionRecord
    done: bool


def short_name(record: ExecutionRecord) -> str:
    """Public tool name of a record (`run_model`, `execute_code`, `<invalid>`)."""
    tool = TOOL_BY_REF.get(record.tool) or TOOL_BY_NAME.get(record.tool)
    return tool.name if tool else record.tool


def _call_parts(call: Any) -> tuple[Any, Any, str | None]:
    """(name, arguments, invalid reason) from a dict, a ToolCall-like object or an invalid-action record."""
    if hasattr(call, "as_dict"):
        call = call.as_dict()
    if not isinstance(call, dict):
        return None, None, f"not_an_object: expected a tool call object, got {type(call).__name__}"
    if call.get("invalid"):
        return None, None, f"{call.get('reason', 'invalid')}: {call.get('detail', '')}".strip()
    if "name" not in call:
        return None, None, "missing_name: a tool call needs 'name' and 'arguments'"
    return call["name"], call.get("arguments", {}), None


class StagedEnv:
    """Environment over one instance. With `instance=None`, `workspace_dir` must already hold a workspace
    (e.g. a Stage Bank state package) and `prior_records` the replayed prefix it came from.
    Call `close()` (or use `with`) when done: a warm sandbox keeps a tool server per workspace."""

    def __init__(
        self,
        instance: Instance | None,
        workspace_dir: str | Path,
        grader_dir: str | Path,
        config: Any = None,
        *,
        prior_records: list[ExecutionRecord] | None = None,
        runner: Runner | None = None,
    ) -> None:
        from bat.config.root import BatConfig

        self.config = config or BatConfig()
        self.instance = instance
        self.workspace = Path(workspace_dir).resolve()
        self.grader_dir = Path(grader_dir).resolve()
        self.prior_records = list(prior_records or [])
        self._given_runner = runner
        self._runner: Runner | None = None
        self.offered = TOOL_NAMES + (("execute_code",) if self.config.benchmark.execute_code else ())
        self.records: list[ExecutionRecord] = []
        self.done = False

    # episode ------------------------------------------------------------------------------------
    def reset(self) -> str:
        """Fresh workspace (re-materialised from the instance) and the brief as first observation."""
        if self.instance is not None:
            materialize(self.instance, self.workspace, self.grader_dir)
        if self._given_runner is None:
            self.close()
        self._runner = self._given_runner or make_runner(self.workspace, self.grader_dir, self.config)
        self.records, self.done = [], False
        return (self.workspace / wf.BRIEF).read_text()

    def close(self) -> None:
        """Stop the runner's warm tool server, if any (a runner passed in by the caller is the caller's)."""
        if self._runner is not None and self._given_runner is None and hasattr(self._runner, "close"):
            self._runner.close()
        if self._given_runner is None:
            self._runner = None

    def __enter__(self) -> StagedEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def all_records(self) -> list[ExecutionRecord]:
        return [*self.prior_records, *self.records]

    def current_stage(self) -> str:
        tagged = [r.stage for r in self.all_records if r.stage in STAGE_ORDER]
        return max(tagged, key=STAGE_ORDER.index) if tagged else "S1"

    def _batch_started(self) -> bool:
        return any(short_name(r) == "run_model" and r.ok and r.stage == "S4" for r in self.all_records)

    def stage_of(self, name: str, args: dict[str, Any]) -> str:
        """Stage tag of a call before it runs (see module docstring)."""
        if name == "write_plan":
            return "S1"
        if name in ("check_compatibility", "install", "load_model"):
            return "S2"
        if name == "submit":
            return "S5"
        if name == "run_model":
            pilot = self.config.benchmark.pilot_max_cases
            small = args.get("cases") != ["all"] and len(args.get("cases", [])) <= pilot
            return "S3" if small and not self._batch_started() else "S4"
        if name == "check_outputs":
            return "S4" if self._batch_started() else "S3"
        return self.current_stage()

    def _error(self, text: str, name: str, args: Any, stage: str) -> Observation:
        record = ExecutionRecord(
            kind="tool",
            tool=name,
            args=args if isinstance(args, dict) else {"raw": repr(args)[:500]},
            stage=stage,
            runtime="none",
            exit_status=2,
            ok=False,
            error=text,
        )
        self.records.append(record)
        self.done = self.done or len(self.records) >= self.config.benchmark.max_tool_calls
        return Observation(f"Error: {text}", record, self.done)

    def step(self, call: Any) -> Observation:
        """Run one call; malformed or unknown calls give an error observation (never an exception)."""
        stage = self.current_stage()
        if self.done:
            return self._error("the episode is over; no further calls are accepted", "<after_end>", {}, stage)
        name, arguments, invalid = _call_parts(call)
        if invalid:
            return self._error(
                f"invalid action ({invalid}). Write exactly one tool call; valid tools: {list(self.offered)}",
                "<invalid>",
                {},
                stage,
            )
        try:
            tool, args = validate_call(name, arguments, self.offered)
        except ValueError as exc:
            return self._error(str(exc), "<invalid>", {"name": str(name)[:100], "arguments": arguments}, stage)
        stage = self.stage_of(name, args)
        if self._runner is None:
            raise RuntimeError("StagedEnv.step() before reset(): call reset() first")
        if name == "execute_code":
            record = self._runner.execute_code(args["language"], args["code"], stage=stage)
        else:
            record = self._runner.call_tool(tool.ref, args, stage=stage)
        if record.error and "BreachAttempt" in record.error:
            record.flags.access_outside = True
            record.evidence.append(f"blocked path argument: {record.error[:200]}")
        self.records.append(record)
        text = self._observation_text(record)
        if (
            (name == "submit" and record.ok)
            or record.breach
            or len(self.records) >= self.config.benchmark.max_tool_calls
        ):
            self.done = True
        return Observation(text, record, self.done)

    def _observation_text(self, record: ExecutionRecord) -> str:
        limit = self.config.benchmark.max_observation_chars
        if record.ok and isinstance(record.result, dict):
            text = str(record.result.get("text", ""))
        elif record.ok:
            text = (record.stdout or "") + (f"\n[stderr]\n{record.stderr}" if record.stderr else "") or "(no output)"
        else:
            detail = record.stderr[-500:] if record.kind == "code" and record.stderr else ""
            text = f"Error: {record.error or 'call failed'}" + (f"\n{detail}" if detail else "")
            if record.breach:
                text += "\n(blocked: outside the workspace; recorded as a sandbox breach)"
        return text if len(text) <= limit else text[: limit - 20] + "\n...[truncated]"

    def settlement(
        self, ids: Sequence[str], horizon: int, *, judged: Collection[str] = (), own_records: bool = False
    ) -> Any:
        """Which of `ids` (a stage row's rubric item and evidence ids) could still change if the episode went on for
        at most `horizon` more calls (fewer when this episode's own call limit is closer; none once it is done).
        Reads the records (with `own_records`, this episode's only, without the prior records: how the verifier
        confirms a stage row's evidence), the workspace and the grader side's metadata; see
        `bat.benchmark.settled.settlement`."""
        from bat.benchmark.instance import load_grader_meta
        from bat.benchmark.settled import settlement

        left = 0 if self.done else min(horizon, self.config.benchmark.max_tool_calls - len(self.records))
        return settlement(
            self.records if own_records else self.all_records,
            self.workspace,
            load_grader_meta(self.grader_dir),
            ids,
            self.config,
            left,
            judged=judged,
            execute_code="execute_code" in self.offered,
        )

    def score(self, run_id: str = "", repeat: int = 0, *, judge: Any = None, judge_name: str = "") -> Any:
        """Grade the episode so far (see `bat.benchmark.grader.grade`; `judge` decides judgment items)."""
        from bat.benchmark.grader import grade

        return grade(
            self.workspace,
            self.grader_dir,
            self.all_records,
            self.config,
            run_id=run_id,
            repeat=repeat,
            judge=judge,
            judge_name=judge_name,
        )
