"""Human-readable event lines (`tail -f` friendly) in `state/<run>/events.log` and `round_NN/events.log`."""

from __future__ import annotations

import datetime as _dt
import os
import socket

from bat.state.layout import RunLayout


def log_event(layout: RunLayout, round_index: int | None, phase: str, message: str) -> str:
    """Append one line `time host round phase message` to the run log and the round's log; returns it."""
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    where = f"r{round_index:02d}" if round_index is not None else "run"
    job = os.environ.get("SLURM_JOB_ID") or os.environ.get("SUBMITIT_LOCAL_JOB_ID") or "-"
    line = f"{now} {socket.gethostname()} job={job} pid={os.getpid()} {where} {phase}: {message}\n"
    targets = [layout.events_log]
    if round_index is not None:
        targets.append(layout.round_events(round_index))
    for path in targets:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as handle:  # one short write per line: lines never interleave
            handle.write(line)
    return line
