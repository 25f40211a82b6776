"""The `apptainer exec` command line that wraps a phase's python (Apptainer is not run on these machines).

Binds: the state dir at the same path, every host path the config names at the same path
(`container_paths.configured_paths`), node-local scratch over /tmp (HF_HOME and the Slurm relay live there), plus
`container.binds`; env: PYTHONNOUSERSITE=1 (no ~/.local leaking in), HF_HOME, HF_HUB_OFFLINE=1, and the job's
variables named in `container.pass_env`. The hook runs through `layout.container_exec` (`bat.orchestrate.
container_exec`), which relays the Slurm commands of the phase to the job's host side when `container.slurm_relay`.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bat.config.orchestrate import ContainerConfig
from bat.orchestrate.container_exec import write_container_exec
from bat.orchestrate.container_paths import IMAGE_ENV, configured_paths
from bat.state.layout import RunLayout

if TYPE_CHECKING:
    from bat.config.root import BatConfig

CONTAINER_TMP = "/tmp"
CONTAINER_HF_HOME = "/tmp/hf_home"
RELAY_PATH = 'PATH="$BAT_SLURM_RELAY/bin:$PATH"; export PATH; exec "$@"'
"""`sh -c` text run first inside the container: the relayed Slurm commands come first on PATH."""


def apptainer_argv(
    cfg: ContainerConfig,
    state_root: str | Path,
    command: list[str],
    scratch: str | None = None,
    paths: Iterable[str] = (),
) -> list[str]:
    """argv `apptainer exec --nv --containall --bind ... IMAGE command...` for one phase process; `paths` are
    further host paths bound at the same path (duplicates bound once). Raises ValueError on an empty command or
    a bind that is not `src[:dst[:opts]]`."""
    if not command:
        raise ValueError("apptainer_argv: empty command; pass e.g. ['python', '-m', 'submitit.core._submit', DIR]")
    state = str(Path(state_root).resolve())
    argv = [cfg.apptainer, "exec"]
    if cfg.nv:
        argv.append("--nv")
    # scratch over /tmp first: a later bind of a path under /tmp (a state dir there) then lands on top of it
    argv += ["--containall", "--bind", f"{scratch or cfg.scratch}:{CONTAINER_TMP}", "--bind", f"{state}:{state}"]
    for path in dict.fromkeys(paths):
        if path != state:
            argv += ["--bind", f"{path}:{path}"]
    for bind in cfg.binds:
        if not bind or bind.count(":") > 2:
            raise ValueError(f"container.binds entry {bind!r} is not 'src[:dst[:opts]]'")
        argv += ["--bind", bind]
    argv += ["--env", "PYTHONNOUSERSITE=1", "--env", f"HF_HOME={CONTAINER_HF_HOME}", "--env", "HF_HUB_OFFLINE=1"]
    argv += ["--env", f"{IMAGE_ENV}={cfg.image}", "--pwd", state, cfg.image, *command]
    return argv


def shell_word(word: str, expand: bool = True) -> str:
    """Quote for bash; with `expand`, keep `$VAR`/`${VAR:-x}` expandable (wrapped in double quotes)."""
    if expand and "$" in word:
        return '"' + word.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`") + '"'
    return shlex.quote(word)


def container_argv(
    config: BatConfig, layout: RunLayout, command: list[str], extra_pass_env: Sequence[str] = ()
) -> list[str]:
    """The full job-side argv: `env BAT_CONTAINER_PASS_ENV=... bash CONTAINER_EXEC SCRATCH RELAY apptainer exec
    ... IMAGE [sh -c RELAY_PATH bat-relay] command...`; `extra_pass_env` (a phase's own `resources.<phase>.env`
    names) joins `container.pass_env`. Writes `layout.container_exec` (the wrapper script)."""
    cfg = config.orchestrate.container
    if cfg.slurm_relay:
        command = ["/bin/sh", "-c", RELAY_PATH, "bat-relay", *command]
    paths = [path for _, path in configured_paths(config)]
    inner = apptainer_argv(cfg, layout.root, command, paths=paths)
    wrapper = write_container_exec(layout)
    relay = "1" if cfg.slurm_relay else "0"
    passed = " ".join(dict.fromkeys([*cfg.pass_env, *extra_pass_env]))
    return ["env", f"BAT_CONTAINER_PASS_ENV={passed}", "bash", wrapper, cfg.scratch, relay, *inner]


def submitit_python(config: BatConfig, layout: RunLayout, extra_pass_env: Sequence[str] = ()) -> str:
    """The string for submitit's `python=` hook: sbatch runs `<this> -u -m submitit.core._submit DIR`."""
    cfg = config.orchestrate.container
    argv = container_argv(config, layout, [cfg.python], extra_pass_env)
    expandable = {cfg.scratch, f"{cfg.scratch}:{CONTAINER_TMP}"}  # shell-expanded in the job (e.g. $SLURM_TMPDIR)
    return " ".join(shell_word(word, word in expandable) for word in argv)
