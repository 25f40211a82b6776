"""Apptainer and the phase image, and unprivileged user namespaces for the tool sandbox (`bat doctor`).

Reads the config's `orchestrate.container` and `sandbox` sections, PATH and /proc/sys; runs `apptainer --version`,
`apptainer exec IMAGE python -c ...` (the image's own Python stack) and bubblewrap exactly as the sandbox starts it
for an ordinary user (`bat.sandbox.runtimes.USER_NAMESPACES`). Writes nothing.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from bat.doctor.finding import Finding, last_line, ok, problem, run_command, unused

if TYPE_CHECKING:
    from bat.config.root import BatConfig

IMAGE_PROBE = "import bat, submitit, torch, transformers; print('torch', torch.__version__)"
"""What the image's Python must import for a phase to start inside it."""
USERNS_KNOBS = (
    "/proc/sys/user/max_user_namespaces",
    "/proc/sys/kernel/unprivileged_userns_clone",
    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
)
"""Kernel settings that allow or forbid unprivileged user namespaces (Linux, Debian/Ubuntu, Ubuntu >= 23.10)."""


def check_apptainer(config: BatConfig, image_timeout_s: float = 180.0) -> list[Finding]:
    """Apptainer on PATH, then the image: present, readable and able to import bat's stack."""
    cfg = config.orchestrate.container
    if not cfg.enabled:
        return [unused("apptainer", "orchestrate.container.enabled is false: phases run in the host environment")]
    program = cfg.apptainer if shutil.which(cfg.apptainer) else shutil.which("apptainer") or shutil.which("singularity")
    version = run_command([program, "--version"]) if program else None
    image = Path(cfg.image)
    findings = []
    if version is None or version.code != 0:
        seen = f"{program} --version failed: {last_line(version.output)}" if version else "is not on PATH"
        program = None
        findings.append(
            problem(
                "apptainer",
                f"orchestrate.container.apptainer {cfg.apptainer!r} {seen} (nor apptainer/singularity)",
                "run on a compute node (login nodes often lack it) or `module load apptainer`; set "
                "orchestrate.container.apptainer to its path; or set orchestrate.container.enabled false and run "
                "the phases in the checkout's venv (scripts/setup_cluster.sh)",
            )
        )
    else:
        findings.append(ok("apptainer", f"{program}: {version.output}"))
    if not image.is_file() or not os.access(image, os.R_OK):
        findings.append(
            problem(
                "apptainer image",
                f"orchestrate.container.image {cfg.image} is not a readable file",
                "build it with containers/build.sh OUT.sif (check the pins first: scripts/check_pins.py) and set "
                "orchestrate.container.image to its absolute path",
            )
        )
    elif program is None:
        findings.append(problem("apptainer image", f"{image}: present; not started (no apptainer)", "see apptainer"))
    else:
        findings.append(_image_imports(program, image, cfg.python, image_timeout_s))
    return findings


def _image_imports(program: str, image: Path, python: str, timeout_s: float) -> Finding:
    """Start the image's python and import bat's stack in it."""
    ran = run_command([program, "exec", "--containall", str(image), python, "-c", IMAGE_PROBE], timeout_s)
    if ran is None or ran.code != 0:
        why = last_line(ran.output) if ran else "apptainer vanished"
        return problem("apptainer image", f"{image}: its python cannot import bat's stack: {why}", "rebuild it")
    return ok("apptainer image", f"{image}: {last_line(ran.output)}")


def _knobs() -> str:
    """The user-namespace kernel settings that exist here, `path=value`."""
    found = []
    for knob in USERNS_KNOBS:
        try:
            found.append(f"{Path(knob).name}={Path(knob).read_text().strip()}")
        except OSError:
            continue
    return ", ".join(found) or "no user-namespace settings readable"


def userns_argv(bwrap: str) -> list[str]:
    """bubblewrap with the namespaces the tool sandbox uses for an ordinary user, running `true`."""
    from bat.sandbox.runtimes import USER_NAMESPACES

    return [bwrap, *USER_NAMESPACES, "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]


def check_user_namespaces(config: BatConfig) -> list[Finding]:
    """Start bubblewrap in a new user namespace (as the sandbox does for an ordinary user). As root it also starts it
    as `sandbox.drop_uid` through `setpriv`, because phases on a cluster never run as root."""
    if config.sandbox.runtime != "bwrap":
        return [unused("user namespaces", f"sandbox.runtime {config.sandbox.runtime}: bubblewrap is not used")]
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return [
            problem(
                "user namespaces",
                "bubblewrap (bwrap) is not on PATH",
                "use the image (it ships bubblewrap), or put a bwrap binary on PATH (conda-forge: bubblewrap)",
            )
        ]
    argv = [*userns_argv(bwrap), "--", "true"]
    who = "this user"
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            return [problem("user namespaces", "running as root without setpriv", "run bat doctor as your own user")]
        uid = str(config.sandbox.drop_uid)
        argv = [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]
        who = f"uid {uid} (root drops to it for this check)"
    ran = run_command(argv)
    if ran is None or ran.code != 0:
        return [
            problem(
                "user namespaces",
                f"bubblewrap could not start a user namespace as {who}: {last_line(ran.output if ran else '')} "
                f"({_knobs()})",
                "ask the site to allow unprivileged user namespaces on the compute nodes (user.max_user_namespaces "
                "> 0; on Ubuntu kernel.apparmor_restrict_unprivileged_userns=0), or run the tools with "
                "sandbox.runtime: process (no isolation: trusted content only)",
            )
        ]
    return [ok("user namespaces", f"bubblewrap started a user namespace as {who} ({_knobs()})")]
