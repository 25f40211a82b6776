"""The installed Python stack against bat's pins (`bat doctor`), and the requirement lists the cluster setup installs
(`python -m bat.doctor.stack [--driver]`, used by `scripts/setup_cluster.sh`). Reads the checkout's `pyproject.toml`
(the `==` pins of `[project].dependencies`; the installed distribution's metadata when the file is not beside the
package) and `importlib.metadata`; writes nothing. A local build label (`2.13.0+cpu`) matches its pin (`2.13.0`).

With `orchestrate.container.enabled` the phases run in the image and the host venv only runs the driver,
`bat config plan` and `bat doctor`: there the pins of `PHASE_ONLY` are not needed (`--driver` leaves them out).
"""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

from bat.doctor.finding import Finding, ok, problem
from bat.orchestrate.pins import parse_pins, pyproject_requirements

PHASE_ONLY = ("torch", "transformers", "tokenizers", "safetensors", "accelerate", "deepspeed", "peft")
"""Pins only the phases import (training, generation, the KL check): a driver-only venv goes without them."""


def bat_pins() -> tuple[dict[str, str], str]:
    """bat's pinned dependencies and where they were read."""
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    if pyproject.is_file():
        return parse_pins(pyproject_requirements(pyproject.read_text(encoding="utf-8"))), str(pyproject)
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


def check_stack(driver_only: bool = False) -> list[Finding]:
    """Python version and every pin against what this interpreter imports (without `PHASE_ONLY` when the phases run
    in the image: `driver_only`)."""
    pins, where = bat_pins()
    if driver_only:
        pins = {name: version for name, version in pins.items() if name not in PHASE_ONLY}
        where += " (phases run in the image: the driver's pins only)"
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


def main(argv: list[str] | None = None) -> int:
    """Print the pinned requirements one a line (`--driver`: without `PHASE_ONLY`) for pip."""
    driver = "--driver" in (sys.argv[1:] if argv is None else argv)
    pins, _ = bat_pins()
    print("\n".join(f"{n}=={v}" for n, v in pins.items() if not (driver and n in PHASE_ONLY)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
