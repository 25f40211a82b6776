"""The SQL QA environment: tools over in-memory SQLite databases built from the workspace's SQL text, turn stages,
and deterministic grading (criteria from the records; the task metric executes the gold query and the submitted one
on the full database and compares their rows).

Workspace: `question.md`, `db/full.sql`, `db/sample.sql`, and what the agent writes: `draft.sql` (draft_query) and
`answer.json` (submit_answer). The gold query stays in the task, never in the workspace.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from bat.staged.interface import (
    Action,
    Environment,
    EnvState,
    Score,
    Stage,
    StageState,
    Step,
    Task,
    read_tree,
    score_from_items,
    write_tree,
)

STAGE_OF_TOOL = {
    "list_tables": "inspect",
    "describe_table": "inspect",
    "draft_query": "draft",
    "run_query": "validate",
    "submit_answer": "submit",
}
ORDER = ("inspect", "draft", "validate", "submit")
REQUIRED = {"describe_table": ("table",), "draft_query": ("sql",), "run_query": ("sql",), "submit_answer": ("sql",)}
MAX_CALLS = 12
MAX_ROWS = 10


def _norm(sql: Any) -> str:
    return " ".join(str(sql or "").split()).rstrip(";").strip().lower()


def _database(script: str) -> sqlite3.Connection:
    con = sqlite3.connect(":memory:")
    con.executescript(script)
    con.execute("PRAGMA query_only = ON")
    return con


def execute(script: str, sql: str) -> list[list[Any]]:
    """Rows of `sql` (read-only) on the database `script` builds; sqlite3.Error on a bad query."""
    con = _database(script)
    try:
        return [list(r) for r in con.execute(sql).fetchmany(200)]
    finally:
        con.close()


class SqlEnv(Environment):
    """One episode on one task; the workspace is `workdir/workspace`."""

    def __init__(self, task: Task, workdir: str | Path, stages: tuple[Stage, ...], state: StageState | None) -> None:
        self.task, self.stages, self.restore_from = task, stages, state
        self.workspace = Path(workdir) / "workspace"
        self.prior: list[dict[str, Any]] = []
        self.records: list[dict[str, Any]] = []

    def reset(self) -> str:
        shutil.rmtree(self.workspace, ignore_errors=True)
        if self.restore_from is None:
            files = {
                "question.md": f"# Question\n\n{self.task.data['question']}\n\nAnswer with one SQL query (submit_answer); "
                "it runs on the full database. run_query runs on a small sample of it.\n",
                "db/full.sql": self.task.data["full_sql"],
                "db/sample.sql": self.task.data["sample_sql"],
            }
            write_tree(self.workspace, {k: v.encode("utf-8") for k, v in files.items()})
            self.prior = []
        else:
            write_tree(self.workspace, self.restore_from.files)
            self.prior = [dict(r) for r in self.restore_from.prior]
        self.records = []
        return (self.workspace / "question.md").read_text()

    @property
    def history(self) -> list[dict[str, Any]]:
        return [*self.prior, *self.records]

    def _stage(self) -> str:
        tagged = [r["stage"] for r in self.history]
        return max(tagged, key=ORDER.index) if tagged else ORDER[0]

    @property
    def done(self) -> bool:
        return len(self.records) >= MAX_CALLS or any(r["tool"] == "submit_answer" and r["ok"] for r in self.history)

    def _db(self, name: str) -> str:
        return (self.workspace / "db" / f"{name}.sql").read_text()

    def _run(self, name: str, args: dict[str, Any]) -> str:
        if name == "list_tables":
            return "tables: " + ", ".join(r[0] for r in execute(self._db("sample"), "SELECT name FROM sqlite_master"))
        if name == "describe_table":
            con = _database(self._db("sample"))
            try:
                cols = con.execute(f"PRAGMA table_info({json.dumps(str(args['table']))})").fetchall()
                if not cols:
                    raise ValueError(f"no table {args['table']!r}; call list_tables")
                parts = []
                for col in cols:
                    text = f"{col[1]} {col[2]}"
                    if col[2] == "TEXT":
                        seen = con.execute(f'SELECT DISTINCT "{col[1]}" FROM "{args["table"]}" LIMIT 5').fetchall()
                        text += " e.g. " + ", ".join(repr(v[0]) for v in seen)
                    parts.append(text)
                return f"{args['table']}: " + "; ".join(parts)
            finally:
                con.close()
        if name == "draft_query":
            execute(self._db("sample"), f"EXPLAIN {args['sql']}")
            (self.workspace / "draft.sql").write_text(str(args["sql"]) + "\n")
            return "draft saved to draft.sql; it parses"
        rows = execute(self._db("sample" if name == "run_query" else "full"), str(args["sql"]))
        if name == "submit_answer":
            (self.workspace / "answer.json").write_text(json.dumps({"sql": args["sql"], "rows": rows}) + "\n")
            return f"submitted: {len(rows)} row(s) on the full database"
        return f"{len(rows)} row(s) on the sample: " + json.dumps(rows[:MAX_ROWS])

    def step(self, action: Action) -> Step:
        """Run one tool call; malformed calls, unknown tools and SQL errors give an error observation."""
        name = action.get("name") if not action.get("invalid") else None
        args = action.get("arguments") if isinstance(action.get("arguments"), dict) else {}
        stage = STAGE_OF_TOOL.get(str(name), self._stage())
        record = {"tool": str(name), "arguments": args, "stage": stage, "ok": False}
        if self.done:
            text = "Error: the episode is over"
        elif name not in STAGE_OF_TOOL:
            text = f"Error: invalid action {action.get('reason') or name!r}; valid tools: {list(STAGE_OF_TOOL)}"
        elif any(not isinstance(args.get(k), str) for k in REQUIRED.get(str(name), ())):
            text = f"Error: {name} needs string arguments {list(REQUIRED[str(name)])}"
        else:
            try:
                text, record["ok"] = self._run(str(name), args), True
            except (sqlite3.Error, ValueError) as exc:
                text = f"Error: {exc}"
        record["observation"] = text
        self.records.append(record)
        return Step(text, stage, record["ok"], self.done, record)

    def state(self) -> EnvState:
        return EnvState(self.task.task_id, self._stage(), len(self.records), self.done)

    def snapshot(self) -> StageState:
        return StageState(self.task.task_id, self._stage(), read_tree(self.workspace), tuple(self.history))

    def score(self) -> Score:
        """Criteria from the records (see `SqlQA.stages`); task = 1 when the submitted query's rows on the full
        database equal the gold query's."""
        data, hist = self.task.data, self.history
        ok = [r for r in hist if r["ok"]]
        first_draft = next((i for i, r in enumerate(ok) if r["tool"] == "draft_query"), len(ok))
        before = ok[:first_draft]
        described = {str(r["arguments"].get("table")) for r in before if r["tool"] == "describe_table"}
        drafts = [_norm(r["arguments"]["sql"]) for r in ok if r["tool"] == "draft_query"]
        last = drafts[-1] if drafts else None
        submits = [r for r in ok if r["tool"] == "submit_answer"]
        runs = [r for r in ok if r["tool"] == "run_query" and _norm(r["arguments"]["sql"]) == last]
        validated = bool(runs) and (not submits or ok.index(runs[-1]) < ok.index(submits[-1]))
        sample = execute(data["sample_sql"], runs[-1]["arguments"]["sql"]) if runs else []
        items = {
            "inspect": {
                "inspect_listed_tables": any(r["tool"] == "list_tables" for r in before),
                "inspect_described_tables": set(data["tables"]) <= described,
            },
            "draft": {
                "draft_saved": last is not None,
                "draft_reads_tables": last is not None and all(t in last for t in data["tables"]),
            },
            "validate": {
                "validate_ran_draft": validated,
                "validate_sample_answer": validated and any(v not in (None, 0) for row in sample for v in row),
            },
            "submit": {
                "submit_done": bool(submits)
                and any(t in _norm(submits[-1]["arguments"]["sql"]) for t in data["tables"]),
                "submit_validated": bool(submits) and _norm(submits[-1]["arguments"]["sql"]) == last,
            },
        }
        gold = execute(data["full_sql"], data["gold"])
        answer = json.loads((self.workspace / "answer.json").read_text())["rows"] if submits else None
        task = float(answer == gold)
        return score_from_items(self.stages, items, task, {"execution_match": task})
