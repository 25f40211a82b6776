"""`sqlqa`: question answering over small synthetic SQLite databases, a staged benchmark in four stages
(inspect, draft, validate, submit) written only against `bat.staged.interface`.

Each task is a two-table database (12-20 rows, SQL text in the workspace) and a question whose answer is one query:
`count` (rows with a status), `total` (a sum over rows with a status) or `join` (rows whose parent has a category).
Tools: list_tables, describe_table (columns and sample values), draft_query (saved to draft.sql once it parses),
run_query (on the sample database), submit_answer (runs on the full database; ends the episode). Grading is
deterministic: criteria from the calls, the task metric by executing the gold query and the submitted one. The
expert finishes in at most 6 calls. Everything runs offline on the standard library's sqlite3.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bat.benchmarks.sqlqa.env import SqlEnv
from bat.benchmarks.sqlqa.tasks import TRACKS, generate
from bat.staged.interface import (
    HELDOUT_SPLITS,
    PRACTICE,
    Action,
    Agent,
    Benchmark,
    Criterion,
    Environment,
    Stage,
    StageState,
    Task,
    seed_from,
)

STAGES = (
    Stage(
        "inspect",
        "Inspect",
        0.3,
        (
            Criterion("inspect_listed_tables", "list_tables ran before the first draft."),
            Criterion(
                "inspect_described_tables", "describe_table ran on every table the answer needs before drafting."
            ),
        ),
        "Inspect: list_tables, then describe_table on each table the question needs; note how values are spelled.",
    ),
    Stage(
        "draft",
        "Draft",
        0.2,
        (
            Criterion("draft_saved", "A draft_query call saved a query that parses."),
            Criterion("draft_reads_tables", "The last saved draft reads every table the answer needs."),
        ),
        "Draft: write one SELECT that answers the question with draft_query, using the stored spelling of values.",
    ),
    Stage(
        "validate",
        "Validate",
        0.35,
        (
            Criterion("validate_ran_draft", "The last draft ran on the sample database (run_query) before submitting."),
            Criterion("validate_sample_answer", "That sample run returned a non-empty, non-zero answer."),
        ),
        "Validate: run_query the draft on the sample; an empty or zero answer means the draft is wrong: fix, re-run.",
    ),
    Stage(
        "submit",
        "Submit",
        0.15,
        (
            Criterion("submit_done", "submit_answer ran a query that reads a table the answer needs, without error."),
            Criterion("submit_validated", "The submitted query is the last draft."),
        ),
        "Submit: submit_answer with the validated draft.",
    ),
)
TOOLS = [
    {"name": "list_tables", "description": "List the database's tables.", "parameters": {"type": "object"}},
    *(
        {
            "name": name,
            "description": text,
            "parameters": {"type": "object", "properties": {arg: {"type": "string"}}, "required": [arg]},
        }
        for name, arg, text in (
            ("describe_table", "table", "Columns of a table, with sample values of text columns."),
            ("draft_query", "sql", "Save a SELECT query as the draft (draft.sql) once it parses."),
            ("run_query", "sql", "Run a SELECT on the sample database; shows up to 10 rows."),
            ("submit_answer", "sql", "Run the final SELECT on the full database as the answer; ends the episode."),
        )
    ),
]
DEFAULT_COUNT = {PRACTICE: 8, **dict.fromkeys(HELDOUT_SPLITS, 5)}


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def _script(task: Task, name: str) -> list[dict[str, Any]]:
    data = task.data
    describe = [_call("describe_table", table=t) for t in data["tables"]]
    if name == "expert":
        gold = data["gold"]
        return [_call("list_tables"), *describe, *(_call(t, sql=gold) for t in ("draft_query", "run_query"))] + [
            _call("submit_answer", sql=gold)
        ]
    if name == "noop":
        return [_call("submit_answer", sql="SELECT 0")]
    naive = [_call("draft_query", sql=data["naive"]), _call("run_query", sql=data["naive"])]
    if name == "failure":
        return [_call("list_tables"), *naive, _call("submit_answer", sql=data["naive"])]
    gold = data["gold"]
    fix = [_call("draft_query", sql=gold), _call("run_query", sql=gold)]
    return [_call("list_tables"), *naive, *describe, *fix, _call("submit_answer", sql=gold)]


class SqlQA(Benchmark):
    """The `sqlqa` benchmark; the factory argument (bat's config) is not needed."""

    name = "sqlqa"
    version = "sqlqa-1"
    preamble = (
        "You are a careful data analyst answering a question over a SQLite database. Work through the public stages "
        "in order, call exactly one tool per turn, and read each tool result before the next step."
    )
    agents = ("expert", "noop", "recovery", "failure")

    def __init__(self, config: Any = None) -> None:
        self.config = config

    def stages(self) -> tuple[Stage, ...]:
        return STAGES

    def tracks(self) -> tuple[str, ...]:
        return TRACKS

    def tools(self) -> list[dict[str, Any]]:
        return [dict(t) for t in TOOLS]

    def tasks(self, split: str, *, seed: int, count: int | None = None, secret: str | None = None) -> list[Task]:
        """`count` tasks per track (default 8 practice, 5 held-out); held-out ones from (secret, seed, split)."""
        if split not in (PRACTICE, *HELDOUT_SPLITS):
            raise ValueError(f"unknown split {split!r}; valid: {[PRACTICE, *HELDOUT_SPLITS]}")
        if split != PRACTICE and not secret:
            raise ValueError(f"held-out split {split!r} needs the held-out secret")
        out = []
        for track in TRACKS:
            for index in range(DEFAULT_COUNT[split] if count is None else count):
                if split == PRACTICE:
                    task_seed, prefix = seed_from("sqlqa", seed, PRACTICE, track, index), "sq"
                else:
                    task_seed, prefix = seed_from("sqlqa", secret, seed, split, track, index), "hq"
                data = generate(track, task_seed, split != PRACTICE)
                task_id = f"{prefix}-{track}-{data['digest'][:10]}"
                repeat = 0 if split == PRACTICE else index
                out.append(Task(task_id, track, split, task_seed, data["digest"], repeat, data))
        return out

    def open(self, task: Task, workdir: str | Path, *, state: StageState | None = None) -> Environment:
        return SqlEnv(task, workdir, STAGES, state)

    def agent(self, task: Task, name: str = "expert") -> Agent:
        """Scripted agents: expert (6 calls at most), noop (submits `SELECT 0`), recovery (naive draft, sees 0 on the sample, inspects,
        fixes), failure (submits the naive draft)."""
        if name not in self.agents:
            raise ValueError(f"unknown agent {name!r}; valid: {list(self.agents)}")
        calls = iter(_script(task, name))

        def act(_observation: str) -> Action | None:
            return next(calls, None)

        return act

    def fingerprints(self, secret: str, *, seed: int) -> list[dict[str, str]]:
        """Every held-out task's id, question text and `<task id>=<answer>` (gold query on the full database)."""
        from bat.benchmarks.sqlqa.env import execute

        out = []
        for split in HELDOUT_SPLITS:
            for task in self.tasks(split, seed=seed, secret=secret):
                answer = execute(task.data["full_sql"], task.data["gold"])
                out += [
                    {"kind": "identifier", "value": task.task_id, "source": split},
                    {"kind": "text", "value": task.data["question"], "source": task.task_id},
                    {"kind": "answer", "value": f"{task.task_id}={answer}", "source": task.task_id},
                ]
        return out
