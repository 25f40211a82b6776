"""`bat status --state DIR [--json] [--follow]`: rounds x phases (DONE/running/queued/partial/pending), scores."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

STYLE = {
    "done": "green",
    "running": "bold yellow",
    "queued": "cyan",
    "partial": "yellow",
    "failed": "bold red",
    "pending": "dim",
}


def render(data: dict[str, Any]) -> Any:
    """A rich Table: one row per round, one column per phase, plus Overall and stage scores when present."""
    from rich.table import Table

    title = f"{data['run'] or '?'}  {data['state']}  (round budget {data['round_budget']})"
    table = Table(title=title)
    table.add_column("round", justify="right")
    for phase in data["phase_order"]:
        table.add_column(phase)
    table.add_column("Overall", justify="right")
    table.add_column("stages", justify="left")
    for row in data["rounds"]:
        cells = []
        for phase in data["phase_order"]:
            cell = row["phases"].get(phase)
            if cell is None:
                cells.append("")
                continue
            text = cell["status"] + (f" {cell['job_id']}" if cell["status"] in ("running", "queued", "failed") else "")
            cells.append(f"[{STYLE[cell['status']]}]{text}[/]")
        scores = row["scores"] or {}
        overall = scores.get("overall")
        stages = " ".join(
            f"{k}={'null' if v is None else f'{100 * v:.1f}'}" for k, v in (scores.get("stages") or {}).items()
        )
        table.add_row(str(row["round"]), *cells, "" if overall is None else f"{100 * overall:.1f}", stages)
    return table


def _handler(args: argparse.Namespace) -> int:
    from rich.console import Console

    from bat.orchestrate.status import collect_status
    from bat.state.layout import RunLayout

    layout = RunLayout(args.state)
    if not layout.root.is_dir():
        print(f"bat status: {layout.root} does not exist (pass the --state DIR given to `bat run`)")
        return 2
    console = Console(width=max(Console().width, 132))
    while True:
        data = collect_status(layout)
        if args.json:
            print(json.dumps(data, sort_keys=True))
        else:
            console.print(render(data))
        if not args.follow:
            return 0
        time.sleep(args.interval)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("status", help="show rounds x phases of a run (DONE/running/queued/partial/pending)")
    parser.add_argument("--state", required=True, help="run state directory")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON instead of a table")
    parser.add_argument("--follow", action="store_true", help="refresh until interrupted (Ctrl-C)")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between refreshes with --follow")
    parser.set_defaults(handler=_handler)
