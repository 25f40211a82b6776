"""The `apptainer exec` command line that wraps a phase's python (Apptainer is not run on these machines).

Binds: the state dir at the same path, node-local scratch over /tmp (HF_HOME lives there), plus
`container.binds`; env: PYTHONNOUSERSITE=1 (no ~/.local leaking in), HF_HOME, HF_HUB_OFFLINE=1.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from bat.config.orchestrate import ContainerConfig

CONTAINER_TMP = "/tmp"
CONTAINER_HF_HOME = "/tmp/hf_home"


def apptainer_argv(
    cfg: ContainerConfig, state_root: str | Path, command: list[str], scratch: str | None = None
) -> list[str]:
    """argv `apptainer exec --nv --containall --bind ... IMAGE command...` for one phase process."""
    if not command:
        raise ValueError("apptainer_argv: empty command; pass e.g. ['python', '-m', 'submitit.core._submit', DIR]")
    state = str(Path(state_root).resolve())
    argv = [cfg.apptainer, "exec"]
    if cfg.nv:
        argv.append("--nv")
    argv += ["--containall", "--bind", f"{state}:{state}", "--bind", f"{scratch or cfg.scratch}:{CONTAINER_TMP}"]
    for bind in cfg.binds:
        if not bind or bind.count(":") > 2:
            raise ValueError(f"container.binds entry {bind!r} is not 'src[:dst[:opts]]'")
        argv += ["--bind", bind]
    argv += ["--env", "PYTHONNOUSERSITE=1", "--env", f"HF_HOME={CONTAINER_HF_HOME}", "--env", "HF_HUB_OFFLINE=1"]
    argv += ["--pwd", state, cfg.image, *command]
    return argv


def shell_word(word: str) -> str:
    """Quote for bash, but keep `$VAR`/`${VAR:-x}` expandable (wrapped in double quotes)."""
    if "$" in word:
        return '"' + word.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`") + '"'
    return shlex.quote(word)


def submitit_python(cfg: ContainerConfig, state_root: str | Path) -> str:
    """The string for submitit's `python=` hook: sbatch runs `<this> -u -m submitit.core._submit DIR`."""
    argv = apptainer_argv(cfg, state_root, [cfg.python])
    return " ".join(shell_word(word) for word in argv)
