"""Lint of the Apptainer recipe (`containers/bat.def`), parsed by spython's Singularity recipe parser.

Apptainer cannot be installed on the development machines, so the image is never built there; this lint is what
keeps the recipe honest: the sections a phase image needs, the files it copies exist, its pins match
`pyproject.toml`, and the serving engine (which pins its own transformers/torch) lives in its own environment.

Reads: the recipe and `pyproject.toml`. Writes nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

import tomllib
from spython.main.parse.parsers import SingularityParser

REQUIRED_FILES = ("pyproject.toml", "bat", "jobs", "configs", "run_round.sh")
"""Repository paths a phase image must contain (the package, the job entry points, configs, the round script)."""
REQUIRED_ENV = ("PYTHONNOUSERSITE=1", "HF_HUB_OFFLINE=1")
"""Environment a phase needs inside the image: no ~/.local packages leaking in, no model hub at run time."""
ENGINE_PYTHON_ENV = {"vllm": "BAT_VLLM_PYTHON", "sglang": "BAT_SGLANG_PYTHON"}
"""The variable through which bat finds each engine's interpreter in the image (`/opt/venv-<engine>/bin/python`)."""
ENGINE_PINS = ("torch", "transformers")
"""What each engine line of the recipe pins beside the engine: the builds its own requirements name."""


def _pins(pyproject: Path) -> dict[str, str]:
    """`name -> version` of the `==` pins in `[project].dependencies`."""
    data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    pins = {}
    for dep in data["project"]["dependencies"]:
        match = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*==\s*([^\s;]+)\s*", dep)
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


def lint_recipe(recipe: str | Path, pyproject: str | Path, repo: str | Path | None = None) -> list[str]:
    """Problems of the Apptainer `recipe` (empty when clean); file sources resolve against `repo` (default: the
    recipe's parent's parent, i.e. the repository of `containers/bat.def`)."""
    recipe, pyproject = Path(recipe), Path(pyproject)
    repo = Path(repo) if repo is not None else recipe.resolve().parent.parent
    text = recipe.read_text(encoding="utf-8")
    parsed = SingularityParser(str(recipe)).recipe
    if len(parsed) != 1:
        return [f"{recipe}: expected one stage, found {len(parsed)}"]
    stage = next(iter(parsed.values()))
    problems: list[str] = []
    if not re.search(r"^Bootstrap:\s*\S+", text, flags=re.M) or not stage.fromHeader:
        problems.append(f"{recipe}: needs a `Bootstrap:` and a `From:` header")

    copied = {}
    for line in stage.files:
        parts = line.split()
        copied[parts[0]] = parts[-1]
        if not (repo / parts[0]).exists():
            problems.append(f"{recipe}: %files copies {parts[0]!r}, which is not in {repo}")
    for required in REQUIRED_FILES:
        if required not in copied:
            problems.append(f"{recipe}: %files must copy {required!r} into the image")

    post = "\n".join(stage.install)
    pins = _pins(pyproject)
    bat_env = "\n".join(line for line in post.splitlines() if "/opt/venv/bin/pip" in line)
    torch = re.findall(r"\btorch==([^\s\"']+)", bat_env)  # the CUDA build first, at the CPU pin's version
    if not torch:
        problems.append(f"{recipe}: %post must install torch=={pins.get('torch', '?')} (the pyproject pin)")
    elif any(version != pins.get("torch") for version in torch):
        problems.append(f"{recipe}: %post installs torch=={torch[0]}, pyproject.toml pins torch=={pins.get('torch')}")
    if not re.search(r"pip install[^\n]*/opt/bat\b", post):
        problems.append(f"{recipe}: %post must pip-install the project copied to /opt/bat")
    if re.search(r"pip install[^\n]*/opt/bat\[[^\]]*(vllm|sglang)", post):
        problems.append(
            f"{recipe}: %post installs a serving engine into bat's environment; vLLM and SGLang pin their "
            "own transformers/torch builds: give the engine its own venv (as scripts/bootstrap.sh does)"
        )

    environ = {line.strip().removeprefix("export ").strip() for line in stage.environ}
    for required in REQUIRED_ENV:
        if required not in environ:
            problems.append(f"{recipe}: %environment must export {required}")
    problems += _engine_problems(recipe, text, environ)
    if not stage.test:
        problems.append(f"{recipe}: needs a %test section (run at build time)")
    return problems


def _engine_problems(recipe: Path, text: str, environ: set[str]) -> list[str]:
    """Each engine line (`ENGINE) engine_pins="ENGINE==V torch==V transformers==V"`) pins the engine with its torch
    and transformers, and %environment points bat at that engine's venv."""
    from bat.orchestrate.pins import ENGINE_LINE, PIN

    problems = []
    engines = {name: dict(PIN.findall(pins)) for name, pins in ENGINE_LINE.findall(text)}
    if not engines:
        problems.append(f'{recipe}: %post needs the engine table (`vllm) engine_pins="vllm==V torch==V ..." ;;`)')
    for engine, table in engines.items():
        missing = [name for name in (engine, *ENGINE_PINS) if name not in table]
        if missing:
            problems.append(
                f"{recipe}: engine {engine} pins no {missing}; pin the engine with its torch and transformers"
            )
        variable = ENGINE_PYTHON_ENV.get(engine)
        if variable is None:
            problems.append(f"{recipe}: engine {engine} is not one bat starts; valid: {sorted(ENGINE_PYTHON_ENV)}")
        elif f"{variable}=/opt/venv-{engine}/bin/python" not in environ:
            problems.append(
                f"{recipe}: %environment must export {variable}=/opt/venv-{engine}/bin/python (the interpreter bat "
                f"starts the {engine} server with)"
            )
    return problems
