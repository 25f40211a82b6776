"""The code version recorded in run records and evaluation manifests."""

from __future__ import annotations

import subprocess
from pathlib import Path

from bat import __version__


def code_version() -> str:
    """Package version plus the git commit of the source tree when available."""
    root = Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return f"{__version__}+{commit}" if commit else __version__
