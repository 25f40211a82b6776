"""Every host path the config names, bound into the phase container at the same path, and the checks that
refuse a containerised launch whose paths cannot be bound (relative, missing on the host, or unbindable names).

Reads the config and, for existence, the host file system; writes nothing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bat.config.root import BatConfig

IMAGE_ENV = "BAT_CONTAINER_IMAGE"
"""Set inside the container to the image path (`bat.orchestrate.container`): the image is not visible there."""


def interpreter_env(python: str) -> str:
    """The environment folder of an interpreter path: `/envs/x` for `/envs/x/bin/python`, else its folder."""
    folder = Path(python).parent
    return str(folder.parent if folder.name == "bin" else folder)


def configured_paths(config: BatConfig) -> list[tuple[str, str]]:
    """(config field, host path) of each path a phase reads inside the container: `model.path`,
    `model.cache_dir`, `leakage.index_path`, `sandbox.code_paths[i]`, the environment folders of `rollout.vllm.python`,
    `rollout.sglang.python` and `sandbox.python` when they are paths, and the folder of a `rollout.sglang.launcher`
    script (the state dir and scratch are bound apart)."""
    found: list[tuple[str, str | None]] = [
        ("model.path", config.model.path),
        ("model.cache_dir", config.model.cache_dir),
        ("leakage.index_path", config.leakage.index_path),
    ]
    found += [(f"sandbox.code_paths[{i}]", path) for i, path in enumerate(config.sandbox.code_paths)]
    interpreters = (
        ("rollout.vllm.python", config.rollout.vllm.python),
        ("rollout.sglang.python", config.rollout.sglang.python),
        ("sandbox.python", config.sandbox.python),
    )
    found += [(field, interpreter_env(python)) for field, python in interpreters if python and "/" in python]
    launcher = config.rollout.sglang.launcher
    if launcher.endswith(".py") and "/" in launcher:  # a script path, not a module name
        found.append(("rollout.sglang.launcher", str(Path(launcher).parent)))
    return [(field, path) for field, path in found if path]


def _bind_sources(config: BatConfig) -> list[tuple[str, str]]:
    """(field, host path) of the image, the configured paths and the sources of `container.binds`."""
    cfg = config.orchestrate.container
    sources = [(f"orchestrate.container.binds[{i}]", bind.split(":")[0]) for i, bind in enumerate(cfg.binds)]
    return [("orchestrate.container.image", cfg.image), *configured_paths(config), *sources]


def container_problems(config: BatConfig) -> list[str]:
    """Why the configured paths cannot be bound into the phase container; [] when the container is off or all is
    well. Each problem names the field and the value. Inside the container (`BAT_CONTAINER_IMAGE` set: the route
    queueing the next round) the image is not visible and is not checked."""
    cfg = config.orchestrate.container
    if not cfg.enabled:
        return []
    inside = os.environ.get(IMAGE_ENV) == cfg.image
    problems: list[str] = []
    for field, path in _bind_sources(config):
        if not path:
            problems.append(f"{field} is empty; give an absolute host path")
        elif not os.path.isabs(path):
            problems.append(
                f"{field}={path!r} is relative; with orchestrate.container.enabled give an absolute host path "
                "(jobs and the container run from other directories)"
            )
        elif "," in path or (":" in path and field != "orchestrate.container.image"):
            problems.append(f"{field}={path!r} contains ',' or ':', which apptainer --bind cannot take; rename it")
        elif not os.path.exists(path) and not (inside and field == "orchestrate.container.image"):
            hint = "build it with containers/build.sh" if field.endswith("image") else "create it or fix the path"
            problems.append(f"{field}={path!r} does not exist on this host; {hint}")
    return problems
