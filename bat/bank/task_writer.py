"""LLM task writer (paper §2.1, Data Factory: "It asks teacher models to write fictional medical-imaging tasks").

With `bank.task_writer: llm` an OpenAI-compatible endpoint (`bank.task_writer_llm`, called through
`bat.bank.llm_client.ChatClient`) proposes the parameters of every practice task slot as one JSON object
(`TaskProposal`: track, modality, pitfalls, distractors, cases). The prompt lists the valid names and ranges
(`parameter_space`); the reply is parsed, validated against the built-in benchmark's practice generator
(`bat.benchmark.params_problems`, then the generator itself) and turned into the same `PracticeTask` the scripted
path produces (`bat.bank.practice.make_task`, with `params` set), so teacher runs, checks and rows are unchanged.

Practice space only: a written task's instance seed is `practice_seed(track, derive_seed(bank seed, "written",
slot...))`. A proposal cannot name a seed, a space or an identifier (unknown keys are rejected), and nothing here
reads the held-out suite or its secret.

Rejections: an invalid proposal is rejected with a reason code (`REASONS`) and a message naming what is valid, and
counted; the writer asks again (telling the model why) up to `proposals_per_task` times, then leaves the slot
unfilled. `TaskWriter.counts()` (aggregates only) goes into the manifest as `counts.task_writer`.

Determinism: slots are written one at a time, in plan order, in the synthesizing process, so one endpoint reply
sequence gives one bank. Reads: config (bank, benchmark), the endpoint. Writes: `<build>/.written.json` (`WRITTEN`:
each slot's task and rejections, so a resumed synthesis does not ask again; removed with the task markers).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from bat.bank import practice
from bat.schemas.bank import PracticeTask, TaskParams
from bat.state.atomic import atomic_write_json, read_json
from bat.state.bank_layout import TASK_WRITER_PROGRESS_NAME

if TYPE_CHECKING:
    from bat.bank.llm_client import ChatClient
    from bat.config.root import BatConfig

WRITER_VERSION = "llm-writer-1"
"""Version of the prompt and validation rules (part of the bank fingerprint when `bank.task_writer == "llm"`)."""
WRITTEN = TASK_WRITER_PROGRESS_NAME
"""Build-directory file of every written slot's task and rejections (removed before the manifest is written)."""
MIN_CASES = 3
"""Fewest cases of a written task (the benchmark's smallest `cases_per_instance`); the most is `cases_per_instance`."""
REASONS = (
    "endpoint_error",
    "bad_json",
    "schema",
    "unknown_track",
    "track_mismatch",
    "unknown_modality",
    "unknown_pitfall",
    "bad_distractors",
    "cases_out_of_range",
    "outcome_unsuited",
    "generator_refused",
    "duplicate",
)
"""Reason codes of a rejected proposal, in the order they are checked."""
PITFALL_HELP = {
    "normalisation": "inputs come in scanner units; the model needs unit-range scaling, or its output degenerates",
    "layout": "the fitting model's native output layout differs from the submission contract",
    "dependency": "the fitting model needs a package installed before it loads",
    "corrupt_case": "one case contains NaN values that must be noticed and handled",
}
"""What each benchmark pitfall does (shown to the writer)."""


class TaskProposal(BaseModel):
    """One proposal as the endpoint must reply it: exactly these keys, JSON types as written."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    track: str
    modality: str
    pitfalls: list[str] = []
    distractors: list[str] = []
    cases: int


class Rejected(Exception):
    """A proposal that cannot become a task: `code` (one of `REASONS`) and a message naming what is valid."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message


@dataclass(frozen=True)
class Slot:
    """One task to write: a stage-task slot (track, outcome, slot, attempt) or an E2E candidate (`kind="e2e"`)."""

    kind: Literal["stage", "e2e"]
    track: str
    outcome: str
    slot: int
    attempt: int = 0

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.track}/{self.outcome}/{self.slot}/{self.attempt}"


def parameter_space(config: BatConfig) -> dict[str, Any]:
    """The names and ranges a proposal may use: tracks (the bank's) -> modalities, pitfalls -> what each does, and
    the case range; a track's distractors are its other modalities."""
    from bat.benchmark.tracks import get_track

    modalities = {t: list(get_track(t).profiles) for t in practice.bank_tracks(config)}
    return {
        "tracks": modalities,
        "pitfalls": dict(PITFALL_HELP),
        "cases": [MIN_CASES, max(MIN_CASES, config.benchmark.cases_per_instance)],
    }


def build_prompt(config: BatConfig, slot: Slot, feedback: str | None = None) -> list[dict[str, str]]:
    """Chat messages asking for one proposal for `slot`; `feedback` is why the previous proposal was rejected."""
    from bat.benchmark import PILOT_REVEALED

    space = parameter_space(config)
    lo, hi = space["cases"]
    if slot.kind == "e2e":
        want = "an end-to-end task the expert teacher runs whole (it is reduced to fewer cases afterwards)"
    elif slot.outcome == "success":
        want = "a task the expert teacher completes cleanly (any pitfalls)"
    else:
        want = (
            f"a task for the {slot.outcome} outcome: its pilot check must reveal a problem, so `pitfalls` must "
            f"include at least one of {list(PILOT_REVEALED)}"
        )
    lines = [
        f"Write the parameters of one fictional practice task for track {slot.track!r}: {want}.",
        "Reply with one JSON object with exactly these keys:",
        f'- "track": {slot.track!r}',
        f'- "modality": one of {space["tracks"][slot.track]} (the modality of the cases and of the fitting model)',
        '- "pitfalls": a list of distinct names, possibly empty, from:',
        *[f"  - {name}: {text}" for name, text in space["pitfalls"].items()],
        f'- "distractors": a list of 0 to {len(space["tracks"][slot.track]) - 1} distinct modalities of the track, '
        "other than the chosen one, for extra model cards that do not fit the cases",
        f'- "cases": an integer from {lo} to {hi}',
    ]
    if feedback:
        lines += ["", f"Your previous proposal was rejected: {feedback}"]
    system = (
        "You write fictional practice tasks for a staged medical-imaging agent benchmark "
        "(plan, setup, validate, inference, submit). Answer with a single JSON object and nothing else."
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]


def parse_proposal(text: str) -> TaskProposal:
    """The proposal in a reply: the whole text or one fenced ```json block must be a JSON object of
    `TaskProposal`'s keys. Raises `Rejected` (`bad_json` or `schema`)."""
    fenced = re.fullmatch(r"\s*```(?:json)?\s*(.*?)\s*```\s*", text, flags=re.DOTALL)
    body = fenced.group(1) if fenced else text
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise Rejected("bad_json", f"reply is not one JSON object ({exc}); got {text[:120]!r}") from None
    if not isinstance(data, dict):
        raise Rejected("bad_json", f"reply is JSON {type(data).__name__}, not an object")
    try:
        return TaskProposal.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '<root>'}: {e['msg']}" for e in exc.errors())
        valid = ", ".join(TaskProposal.model_fields)
        raise Rejected("schema", f"{problems} (valid keys: {valid})") from None


def validate(proposal: TaskProposal, slot: Slot, config: BatConfig) -> TaskParams:
    """The task parameters of a valid `proposal` for `slot`; raises `Rejected` naming the first problem."""
    from bat.benchmark import PILOT_REVEALED, PITFALLS, InstanceParams, params_problems

    space = parameter_space(config)
    if proposal.track not in space["tracks"]:
        raise Rejected("unknown_track", f"track {proposal.track!r} is unknown; valid: {list(space['tracks'])}")
    if proposal.track != slot.track:
        raise Rejected("track_mismatch", f"this slot is for track {slot.track!r}, got {proposal.track!r}")
    params = InstanceParams(proposal.modality, tuple(proposal.pitfalls), tuple(proposal.distractors))
    problems = params_problems(proposal.track, params)
    for key, code in (
        ("modality", "unknown_modality"),
        ("pitfalls", "unknown_pitfall"),
        ("distractors", "bad_distractors"),
    ):
        if key in problems:
            raise Rejected(code, problems[key])
    lo, hi = space["cases"]
    if not lo <= proposal.cases <= hi:
        raise Rejected("cases_out_of_range", f"cases={proposal.cases}; valid: {lo} to {hi}")
    if slot.kind == "stage" and not practice.suits_pitfalls(proposal.pitfalls, slot.outcome):
        raise Rejected(
            "outcome_unsuited",
            f"outcome {slot.outcome!r} needs a pitfall a pilot reveals, one of {list(PILOT_REVEALED)}; "
            f"got {proposal.pitfalls}",
        )
    return TaskParams(
        modality=proposal.modality,
        pitfalls=tuple(p for p in PITFALLS if p in proposal.pitfalls),
        distractors=tuple(proposal.distractors),
        cases=proposal.cases,
    )


def to_task(params: TaskParams, slot: Slot, config: BatConfig, bank_seed: int, proposal: int) -> PracticeTask:
    """The PracticeTask of valid `params` for `slot`: instance seed from the practice seed space only (derived from
    the bank seed, the slot and the proposal number); an E2E slot also gets its R_lambda from the bank's grid.
    Raises `Rejected("generator_refused")` when the practice generator refuses the parameters."""
    from bat.benchmark import practice_seed
    from bat.benchmark.reduction import choose_reduction
    from bat.seeds import derive_seed

    parts = (slot.kind, slot.track, slot.outcome, slot.slot, slot.attempt, proposal)
    seed = practice_seed(slot.track, derive_seed(bank_seed, "written", *parts), config)
    try:
        if slot.kind == "e2e":
            lam_seed = derive_seed(bank_seed, "written-lambda", *parts)
            lam = choose_reduction(config.bank.reduction_grid, slot.track, params.cases, lam_seed)
            return practice.make_task(
                slot.track, seed, "expert", lam, config, slot=slot.slot, attempt=slot.attempt, params=params
            )
        variant = practice.VARIANT_FOR[slot.outcome]
        return practice.make_task(
            slot.track, seed, variant, None, config, slot=slot.slot, attempt=slot.attempt, params=params
        )
    except ValueError as exc:
        raise Rejected("generator_refused", f"the practice generator refused the parameters: {exc}") from None


class TaskWriter:
    """Writes every practice task of one synthesis through the endpoint; keeps each slot's outcome in `path`."""

    def __init__(self, config: BatConfig, bank_seed: int, path: Path, client: ChatClient | None = None) -> None:
        from bat.bank.llm_client import ChatClient

        self.config, self.bank_seed, self.path = config, bank_seed, Path(path)
        self.client = client or ChatClient(config.bank.task_writer_llm)
        self.entries: dict[str, Any] = read_json(self.path) if self.path.is_file() else {}

    def write(self, slot: Slot, taken: set[str]) -> PracticeTask | None:
        """The task of `slot` (None when every proposal was rejected); a slot written before is not asked again."""
        if slot.key not in self.entries:
            task, rejections = self._ask(slot, taken)
            self.entries[slot.key] = {
                "task": None if task is None else task.model_dump(mode="json"),
                "rejections": rejections,
            }
            atomic_write_json(self.path, self.entries)
        entry = self.entries[slot.key]
        return None if entry["task"] is None else PracticeTask.model_validate(entry["task"])

    def _ask(self, slot: Slot, taken: set[str]) -> tuple[PracticeTask | None, list[list[str]]]:
        from bat.bank.llm_client import TeacherEndpointError

        rejections: list[list[str]] = []
        for n in range(self.config.bank.task_writer_llm.proposals_per_task):
            feedback = rejections[-1][1] if rejections else None
            try:
                try:
                    reply = self.client.complete(build_prompt(self.config, slot, feedback))
                except TeacherEndpointError as exc:
                    raise Rejected("endpoint_error", str(exc)) from None
                task = to_task(validate(parse_proposal(reply), slot, self.config), slot, self.config, self.bank_seed, n)
                if task.task_id in taken:
                    raise Rejected("duplicate", f"task {task.task_id} is already in the bank; propose other values")
                return task, rejections
            except Rejected as rejected:
                rejections.append([rejected.code, rejected.message])
        return None, rejections

    def plan(self, tracks: list[str]) -> list[PracticeTask]:
        """Tasks of every stage-task slot then every E2E slot (the scripted plan's order); unfilled slots are
        skipped. Raises when no slot could be filled, with the rejection counts."""
        slots = [Slot("stage", *s) for s in practice.task_slots(self.config, tracks)]
        slots += [Slot("e2e", t, "success", i) for t in tracks for i in range(self.config.bank.e2e_per_track)]
        tasks: list[PracticeTask] = []
        for slot in slots:
            task = self.write(slot, {t.task_id for t in tasks})
            if task is not None:
                tasks.append(task)
        if not tasks:
            raise RuntimeError(f"the LLM task writer filled none of {len(slots)} task slots: {self.counts()}")
        return tasks

    def replacement(self, failed: PracticeTask, outcome: str, attempt: int, taken: set[str]) -> PracticeTask | None:
        """A new task for the slot of `failed` (its teacher trajectory failed its check), as attempt `attempt`."""
        return self.write(Slot("stage", failed.track, outcome, failed.slot, attempt), taken)

    def counts(self) -> dict[str, Any]:
        """Aggregates for the manifest: proposals, accepted, rejected by reason (with the first message of each
        reason, slots in key order), unfilled slots. No reply text."""
        by_reason: Counter = Counter()
        examples: dict[str, str] = {}
        accepted = unfilled = 0
        for key in sorted(self.entries):
            entry = self.entries[key]
            accepted += entry["task"] is not None
            unfilled += entry["task"] is None
            for code, message in entry["rejections"]:
                by_reason[code] += 1
                examples.setdefault(code, message)
        return {
            "writer": f"llm:{self.config.bank.task_writer_llm.model}",
            "version": WRITER_VERSION,
            "slots": len(self.entries),
            "proposals": accepted + sum(by_reason.values()),
            "accepted": accepted,
            "rejected": sum(by_reason.values()),
            "rejected_by_reason": {code: by_reason[code] for code in REASONS if by_reason[code]},
            "reason_examples": {code: examples[code] for code in REASONS if code in examples},
            "unfilled_slots": unfilled,
        }
