"""Every version the image recipe and `pyproject.toml` pin, and where each is installed from (`scripts/check_pins.py`
asks those registries whether they exist; this module only reads files and judges answers, it never goes online).

Reads `containers/bat.def` (its `From:` image, the `pip install` lines of `%post` with their `--index-url`, and the
per-engine pin table `engine) engine_pins="ENGINE==V torch==V transformers==V"`) and `pyproject.toml` (the `==`
pins of `[project].dependencies` and the `dev` extra, and `requires-python`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

PYPI = "https://pypi.org/simple"
"""The index pip installs from when a line names none."""
ENGINE_LINE = re.compile(r"^\s*([a-z0-9_-]+)\)\s*engine_pins=\"([^\"]+)\"", re.M)
PIN = re.compile(r"(?<![\w.-])([A-Za-z0-9_.\-]+)==([^\s\"';,]+)")
REQUIREMENT_PIN = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*==\s*([^\s;,]+)\s*$")
DEPENDENCIES = re.compile(r"^dependencies\s*=\s*\[(.*?)^\]", re.S | re.M)


@dataclass(frozen=True)
class Pin:
    """One `name==version` and the index it is installed from; `group` says which install it belongs to
    (`bat`, `bat-image`, `dev`, `engine:vllm`, ...)."""

    name: str
    version: str
    index: str
    group: str

    def __str__(self) -> str:
        return f"{self.name}=={self.version}"


@dataclass
class Pins:
    """What a build installs: the base image, Python pins, and each engine's pins (engine, torch, transformers)."""

    base_image: str = ""
    requires_python: str = ""
    pins: list[Pin] = field(default_factory=list)
    engines: dict[str, dict[str, str]] = field(default_factory=dict)


def parse_pins(requirements: list[str]) -> dict[str, str]:
    """name -> version of every `name==version` requirement (markers and ranges left out)."""
    pins = {}
    for line in requirements:
        match = REQUIREMENT_PIN.match(line.split(";")[0])
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


def pyproject_requirements(text: str) -> list[str]:
    """The strings of `[project].dependencies` in a pyproject.toml (a regex: runs on Python 3.10, without tomllib)."""
    found = DEPENDENCIES.search(text)
    return re.findall(r'"([^"]+)"', found.group(1)) if found else []


def recipe_pins(text: str) -> tuple[str, list[Pin], dict[str, dict[str, str]]]:
    """(the `From:` image, the pins of `%post`'s pip lines outside the engine table, engine -> {package: version})."""
    base = re.search(r"^From:\s*(\S+)", text, re.M)
    engines = {name: dict(PIN.findall(pins)) for name, pins in ENGINE_LINE.findall(text)}
    post = text.split("%post", 1)[1].split("\n%", 1)[0] if "%post" in text else ""
    found = []
    for line in post.splitlines():
        if "pip install" not in line or ENGINE_LINE.search(line):
            continue
        index = re.search(r"--(?:index-url|extra-index-url)[ =](\S+)", line)
        where = index.group(1).rstrip("/") if index else PYPI
        found += [Pin(name.lower(), version, where, "bat-image") for name, version in PIN.findall(line)]
    return (base.group(1) if base else ""), found, engines


def pyproject_pins(text: str) -> tuple[str, list[Pin]]:
    """(`requires-python`, the `==` pins of `[project].dependencies` and of the `dev` extra), all from PyPI."""
    python = re.search(r'^requires-python\s*=\s*"([^"]+)"', text, re.M)
    dev = re.search(r"^dev\s*=\s*\[(.*?)\]", text, re.M)
    dev_pins = parse_pins(re.findall(r'"([^"]+)"', dev.group(1))) if dev else {}
    pins = [Pin(n, v, PYPI, "bat") for n, v in parse_pins(pyproject_requirements(text)).items()]
    return (python.group(1) if python else ""), pins + [Pin(n, v, PYPI, "dev") for n, v in dev_pins.items()]


def script_pins(text: str, group: str) -> list[Pin]:
    """The quoted `name==version` pins of a setup script (`scripts/bootstrap.sh`: the CPU vLLM, the demo policy's
    package), from PyPI."""
    return [Pin(n.lower(), v, PYPI, group) for n, v in re.findall(r"[\"']([A-Za-z0-9_.\-]+)==([^\s\"']+)[\"']", text)]


def read_pins(repo: Path) -> Pins:
    """Everything `containers/bat.def`, `pyproject.toml` and `scripts/bootstrap.sh` of `repo` pin; engine pins as
    `engine:<name>` groups."""
    base, image, engines = recipe_pins((repo / "containers" / "bat.def").read_text(encoding="utf-8"))
    python, project = pyproject_pins((repo / "pyproject.toml").read_text(encoding="utf-8"))
    bootstrap = script_pins((repo / "scripts" / "bootstrap.sh").read_text(encoding="utf-8"), "bootstrap")
    pins = Pins(base, python, project + image + bootstrap, engines)
    pins.pins += [Pin(n.lower(), v, PYPI, f"engine:{e}") for e, table in engines.items() for n, v in table.items()]
    return pins


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def of_version(pin: Pin, filename: str) -> bool:
    """Whether an index file is a distribution of exactly the pin's version: a wheel `name-VERSION[+local]-...whl`
    or an sdist `name-VERSION.tar.gz` / `.zip` (names compared with `-`, `_` and `.` alike, as pip does)."""
    if filename.endswith(".whl"):
        parts = filename[: -len(".whl")].split("-")
        if len(parts) < 3:
            return False
        name, version = parts[0], parts[1]
    else:
        stem = re.sub(r"\.(tar\.gz|zip)$", "", filename)
        if stem == filename or "-" not in stem:
            return False
        name, version = stem.rsplit("-", 1)
    return _canonical(name) == _canonical(pin.name) and version.split("+")[0].lower() == pin.version.lower()


def requirement_problems(engine: str, table: dict[str, str], requires_dist: list[str]) -> list[str]:
    """Where the engine's own `Requires-Dist` (its wheel's METADATA) refuses the torch or transformers its line pins
    (markers for extras left out); [] when they agree. Uses `packaging`, which pip and transformers bring."""
    from packaging.requirements import Requirement

    problems = []
    for line in requires_dist:
        req = Requirement(line)
        if req.marker is not None and "extra" in str(req.marker):
            continue
        pinned = table.get(req.name.lower())
        if pinned is not None and req.specifier and not req.specifier.contains(pinned, prereleases=True):
            problems.append(
                f"engine {engine}: {req.name}=={pinned} does not satisfy {engine}'s own requirement "
                f"{req.name}{req.specifier}"
            )
    return problems


def python_problems(pin: Pin, requires_python: set[str | None], project_python: str) -> list[str]:
    """Where a pin's files need a newer Python than the project's `requires-python` allows (lowest allowed version
    against each file's `Requires-Python`); [] when one file accepts it."""
    from packaging.specifiers import SpecifierSet

    lowest = re.search(r">=\s*([0-9.]+)", project_python)
    if not lowest or not requires_python:
        return []
    floor = lowest.group(1)
    if any(spec is None or SpecifierSet(spec).contains(floor) for spec in requires_python):
        return []
    needs = sorted(str(s) for s in requires_python if s)
    return [f"{pin}: needs Python {' or '.join(needs)}; pyproject.toml allows {project_python}: raise requires-python"]
