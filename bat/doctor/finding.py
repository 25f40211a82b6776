"""One doctor finding and the small helpers every check uses (running a command with a time limit)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from typing import Literal

Status = Literal["ok", "problem", "unused"]


@dataclass(frozen=True)
class Finding:
    """One checked item: `seen` says what was found, `fix` what to do (problems only)."""

    name: str
    status: Status
    seen: str
    fix: str = ""

    def as_dict(self) -> dict[str, str]:
        """The finding as a JSON-ready dict (`bat doctor --json`)."""
        return {"name": self.name, "status": self.status, "seen": self.seen, "fix": self.fix}


def ok(name: str, seen: str) -> Finding:
    return Finding(name, "ok", seen)


def problem(name: str, seen: str, fix: str) -> Finding:
    return Finding(name, "problem", seen, fix)


def unused(name: str, seen: str) -> Finding:
    return Finding(name, "unused", seen)


@dataclass(frozen=True)
class Ran:
    """A finished command: exit code and its combined, stripped output."""

    code: int
    output: str


def run_command(argv: list[str], timeout_s: float = 30.0) -> Ran | None:
    """Run `argv` (its first word looked up on PATH) and return its exit code and output; None when the program is
    not on PATH. A command past `timeout_s` or that cannot start comes back as code 124 / 126 with the reason."""
    program = shutil.which(argv[0])
    if program is None:
        return None
    try:
        done = subprocess.run(
            [program, *argv[1:]], capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        return Ran(124, f"{argv[0]} did not finish within {timeout_s:g} s")
    except OSError as exc:
        return Ran(126, f"{argv[0]} could not start: {exc}")
    return Ran(done.returncode, (done.stdout + done.stderr).strip())


def last_line(text: str) -> str:
    """The last non-empty line of a command's output (its error, usually), or `(no output)`."""
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else "(no output)"
