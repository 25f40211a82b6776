"""The repository describes the software, never how it was built: no tracked file names numbered work periods,
whether an accelerator was lent, or which helpers ran. A measured figure carries its commit, date and CPU instead.

Reads every tracked text file (`git ls-files`); fails naming file:line and the phrase."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SELF = Path(__file__).resolve().relative_to(ROOT).as_posix()

# Work-log phrases only: a terminal/process "session" (setsid, `--new-session`, pytest's scope="session") is software
# and stays allowed, so every pattern needs a number or a work-log neighbour around the word.
WORKLOG = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"\bsessions?\s\d+",  # the word, a space and a number
        r"\bsession-\d+\b",  # "the session-23 pin"
        r"\bsession-sized\b",
        r"\b(this|next|previous|earlier|later|that) session\b",
        r"\bthe session's (end|stop)\b",
        r"\bsubagents?\b",
        r"\bhelpers? (ran|wrote|sessions?)\b",
        r"\b(no )?(device|gpu|accelerator)s? (was |were )?lent\b",
        r"\blent (to|device|accelerator|gpu)\b",
        r"\bno device\b",
        r"`status`:\snot\sdrawn",
    )
]


def _tracked_text_files() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    return [name for name in out.decode().split("\0") if name and name != SELF]


def worklog_hits(names: list[str]) -> list[str]:
    """`file:line: phrase` for every work-log phrase in the given files (paths relative to the root; binary and
    missing files skipped)."""
    hits = []
    for name in names:
        path = ROOT / name
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            for pattern in WORKLOG:
                m = pattern.search(line)
                if m:
                    hits.append(f"{name}:{lineno}: {m.group(0)!r}")
    return hits


def test_no_tracked_file_speaks_of_work_sessions():
    hits = worklog_hits(_tracked_text_files())
    assert not hits, "work-log phrases (describe the software; date a figure by commit, date and CPU):\n" + "\n".join(
        hits
    )


def test_the_patterns_catch_work_log_phrases_and_spare_software_sessions():
    flagged = [
        " ".join(("measured in", "session", "34")),
        " ".join(("sessions", "32-34", "beside the experiment")),
        " ".join(("no device", "lent", "(`status`:", "not drawn)")),
        "the session-23 pin",
        " ".join(("resumes next", "session")),
        "a subagent wrote it",
    ]
    spared = [
        "setsid: run the child in its own session",
        '"--new-session",',
        '@pytest.fixture(scope="session")',
        "requests.Session() keeps the connection",
        "converted once per test session",
    ]
    for line in flagged:
        assert any(p.search(line) for p in WORKLOG), line
    for line in spared:
        assert not any(p.search(line) for p in WORKLOG), line
