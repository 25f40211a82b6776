"""`StateFileError`: a state file (JSON, JSONL, marker) that exists but cannot be read as what it should be.

The message names the file (and line, where there is one) and what to do; the CLI prints it and exits 2.
"""

from __future__ import annotations

from pathlib import Path


class StateFileError(ValueError):
    """A damaged or foreign state file: `path`, optional 1-based `line`, `reason` and a `hint` for the user."""

    def __init__(self, path: Path, reason: str, *, line: int | None = None, hint: str = "") -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {reason}" + (f"; {hint}" if hint else ""))
        self.path, self.line, self.reason, self.hint = Path(path), line, reason, hint
