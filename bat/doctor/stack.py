"""The installed Python stack against bat's pins (`bat doctor`). Reads the checkout's `pyproject.toml` (the `==`
pins of `[project].dependencies`; the installed distribution's metadata when the file is not beside the package) and
`importlib.metadata`; writes nothing. A local build label (`2.13.0+cpu`) matches its pin (`2.13.0`)."""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

from bat.doctor.finding import Finding, ok, problem

PIN = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*==\s*([^\s;,]+)\s*$")


def parse_pins(requirements: list[str]) -> dict[str, str]:
    """name -> version of every `name==version` requirement (markers and ranges left out)."""
    pins = {}
    for line in requirements:
        match = PIN.match(line.split(";")[0])
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


def bat_pins() -> tuple[dict[str, str], str]:
    """bat's pinned dependencies and where they were read."""
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    if pyproject.is_file() and sys.version_info >= (3, 11):
        import tomllib

        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        return parse_pins(data["project"]["dependencies"]), str(pyproject)
    requires = [r for r in (metadata.requires("bat") or []) if "extra ==" not in r]
    return parse_pins(requires), "the installed bat's metadata"


def compare(pins: dict[str, str], installed: dict[str, str | None]) -> tuple[list[str], list[str]]:
    """(missing packages, `name have X, pinned Y` mismatches); local labels after `+` are ignored."""
    missing = sorted(name for name in pins if installed.get(name) is None)
    wrong = [
        f"{name} {have} (pinned {pins[name]})"
        for name, have in sorted(installed.items())
        if have is not None and name in pins and have.split("+")[0] != pins[name]
    ]
    return missing, wrong


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def check_stack() -> list[Finding]:
    """Python version and every pin against what this interpreter imports."""
    pins, where = bat_pins()
    missing, wrong = compare(pins, {name: _installed(name) for name in pins})
    python = f"Python {sys.version.split()[0]} at {sys.executable}"
    if missing or wrong:
        parts = ([f"missing: {', '.join(missing)}"] if missing else []) + (
            [f"differ: {'; '.join(wrong)}"] if wrong else []
        )
        return [
            problem(
                "python stack",
                f"{python}; {len(pins)} pins from {where}; " + "; ".join(parts),
                "run scripts/setup_cluster.sh (or `make setup`) again, or use the image",
            )
        ]
    return [ok("python stack", f"{python}; all {len(pins)} pins from {where} installed")]
