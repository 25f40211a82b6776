"""Isolation runtimes behind one interface: turn an inner command into the argv that runs it contained.

* `process`  : prlimit + own session; fast; NO filesystem or network isolation (weaker, documented).
* `bwrap`    : bubblewrap; new pid/net/ipc/uts namespaces, read-only system + python + code, tmpfs
               /tmp, the workspace as the only writable bind at /workspace, everything else absent.
               As root it drops to `drop_uid` (root is exempt from RLIMIT_NPROC).
* `apptainer`: argv for `apptainer exec --containall --net --network none`; needs an image and the
               apptainer binary, neither of which exists on CPU dev machines (argv is unit-tested).
"""

from __future__ import annotations

import abc
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from bat.config.sandbox import SandboxConfig
from bat.sandbox.limits import Limits, find_prlimit, prlimit_argv

INNER_WORKSPACE = "/workspace"
SYSTEM_LINK_DIRS = ("/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
ROOT_NAMESPACES = (
    "--unshare-ipc",
    "--unshare-pid",
    "--unshare-net",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--cap-add",
    "CAP_SETUID",
    "--cap-add",
    "CAP_SETGID",
)
"""bwrap namespaces as root: no user namespace, so the uid drop (`_uid_drop`) is real and RLIMIT_NPROC applies."""
USER_NAMESPACES = ("--unshare-all", "--unshare-user", "--disable-userns")
"""bwrap namespaces as an ordinary user: every namespace, a user namespace that cannot nest another."""
ETC_FILES = ("/etc/alternatives", "/etc/ld.so.cache", "/etc/localtime", "/etc/passwd", "/etc/group", "/etc/fonts")


@dataclass(frozen=True)
class PythonEnv:
    """The interpreter that runs the tool host, and the read-only trees it needs."""

    executable: str
    roots: tuple[str, ...]
    """Interpreter prefix, venv prefix and code directories (mounted read-only by isolating runtimes)."""
    pythonpath: tuple[str, ...] = field(default_factory=tuple)


@lru_cache(maxsize=8)
def python_env(python: str, code_paths: tuple[str, ...]) -> PythonEnv:
    """Describe `python` (its prefixes, queried once) plus the `bat` package dir and `code_paths`."""
    import bat

    if python == sys.executable:
        prefix, base_prefix = sys.prefix, sys.base_prefix
    else:
        query = "import sys; print(sys.prefix); print(sys.base_prefix)"
        out = subprocess.run([python, "-c", query], capture_output=True, text=True, check=True, timeout=60).stdout
        prefix, base_prefix = out.splitlines()[:2]
    bat_dir = Path(bat.__file__).resolve().parent
    extra = tuple(str(Path(p).resolve()) for p in code_paths)
    roots = {str(Path(base_prefix).resolve()), prefix, str(bat_dir), *extra}
    return PythonEnv(executable=python, roots=tuple(sorted(roots)), pythonpath=(str(bat_dir.parent), *extra))


def _inside(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


class Runtime(abc.ABC):
    """Base: subclasses say where the workspace/scratch appear inside and build the outer argv."""

    name = "base"
    isolates_filesystem = False
    isolates_network = False

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()

    def inner_workspace(self, workspace: Path) -> str:
        return str(workspace)

    def inner_scratch(self, scratch: Path) -> str:
        return str(scratch)

    def visible_roots(self, pyenv: PythonEnv) -> list[str]:
        """Host paths the sandboxed code can read besides workspace and scratch (None = everything)."""
        return list(pyenv.roots)

    def inner_python(self, pyenv: PythonEnv) -> str:
        return pyenv.executable

    @abc.abstractmethod
    def argv(
        self,
        inner: list[str],
        *,
        workspace: Path,
        scratch: Path,
        cwd: str,
        limits: Limits,
        pyenv: PythonEnv,
        drop_uid: int,
    ) -> list[str]:
        """The full outer argv that runs `inner` contained, with cwd `cwd` as seen inside."""


class ProcessRuntime(Runtime):
    """Plain subprocess: rlimits via prlimit, own session, tree kill by process group. Not isolating."""

    name = "process"

    def argv(
        self,
        inner: list[str],
        *,
        workspace: Path,
        scratch: Path,
        cwd: str,
        limits: Limits,
        pyenv: PythonEnv,
        drop_uid: int,
    ) -> list[str]:
        return [*prlimit_argv(limits, find_prlimit()), *inner]


class ContainedRuntime(Runtime):
    """A runtime with its own mount and network namespaces: the workspace at /workspace, scratch at /tmp."""

    isolates_filesystem = True
    isolates_network = True

    def inner_workspace(self, workspace: Path) -> str:
        return INNER_WORKSPACE

    def inner_scratch(self, scratch: Path) -> str:
        return "/tmp"


class BwrapRuntime(ContainedRuntime):
    """bubblewrap sandbox; see the module docstring for what is mounted."""

    name = "bwrap"

    def mounts(self, pyenv: PythonEnv) -> list[str]:
        """bwrap options for the read-only system and python trees (parents created 0755)."""
        opts = ["--ro-bind", "/usr", "/usr"]
        for name in SYSTEM_LINK_DIRS:
            if os.path.islink(name):
                opts += ["--symlink", os.readlink(name), name]
            elif os.path.isdir(name):
                opts += ["--ro-bind", name, name]
        for name in ETC_FILES:
            opts += ["--ro-bind-try", name, name]
        bound = ["/usr", "/tmp", *[d for d in SYSTEM_LINK_DIRS if os.path.isdir(d)]]
        made: set[str] = set()
        for root in sorted(pyenv.roots):
            mounted = [b for b in bound if b != "/tmp"]  # /tmp is an empty tmpfs: parents there are made
            if _inside(root, mounted):
                continue
            for parent in reversed(Path(root).parents):
                text = str(parent)
                if text not in ("/", "/tmp") and text not in made and not _inside(text, mounted):
                    opts += ["--perms", "0755", "--dir", text]
                    made.add(text)
            opts += ["--ro-bind", root, root]
            bound.append(root)
        return opts

    def argv(
        self,
        inner: list[str],
        *,
        workspace: Path,
        scratch: Path,
        cwd: str,
        limits: Limits,
        pyenv: PythonEnv,
        drop_uid: int,
    ) -> list[str]:
        bwrap = shutil.which("bwrap")
        if not bwrap:
            raise RuntimeError(
                "runtime 'bwrap' needs bubblewrap on PATH (Debian: apt-get install bubblewrap); "
                "valid runtimes: " + ", ".join(RUNTIMES)
            )
        as_root = os.geteuid() == 0
        spaces = ROOT_NAMESPACES if as_root else USER_NAMESPACES
        tmp_bytes = min(limits.memory_mb, 4 * limits.max_file_mb) * 1024 * 1024
        opts = [
            bwrap,
            *spaces,
            "--die-with-parent",
            "--new-session",
            "--hostname",
            "sandbox",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--perms",
            "1777",
            "--size",
            str(tmp_bytes),
            "--tmpfs",
            "/tmp",
            *self.mounts(pyenv),  # after /tmp, so a venv or code dir under /tmp stays visible
            "--bind",
            str(workspace),
            INNER_WORKSPACE,
            "--chdir",
            cwd,
            "--",
        ]
        drop = _uid_drop(drop_uid) if as_root else []
        return [*opts, *drop, *prlimit_argv(limits, find_prlimit()), *inner]


def _uid_drop(uid: int) -> list[str]:
    """The `setpriv` prefix that drops root to `uid` (and its gid, no supplementary groups) inside bwrap."""
    setpriv = shutil.which("setpriv")
    if not setpriv:
        raise RuntimeError("running bwrap as root needs util-linux `setpriv` to drop privileges")
    return [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]


class ApptainerRuntime(ContainedRuntime):
    """apptainer exec in a contained, network-less instance of the project image (argv only here)."""

    name = "apptainer"

    def visible_roots(self, pyenv: PythonEnv) -> list[str]:
        return ["/opt", "/usr", "/usr/local"]

    def inner_python(self, pyenv: PythonEnv) -> str:
        return "python3"

    def argv(
        self,
        inner: list[str],
        *,
        workspace: Path,
        scratch: Path,
        cwd: str,
        limits: Limits,
        pyenv: PythonEnv,
        drop_uid: int,
    ) -> list[str]:
        image = self.config.apptainer_image
        if not image:
            raise RuntimeError(
                "runtime 'apptainer' needs sandbox.apptainer_image (the .sif built by containers/); "
                "it is not runnable on CPU dev machines"
            )
        binary = shutil.which("apptainer") or "apptainer"
        return [
            binary,
            "exec",
            "--containall",
            "--cleanenv",
            "--no-home",
            "--net",
            "--network",
            "none",
            "--bind",
            f"{workspace}:{INNER_WORKSPACE}:rw",
            "--bind",
            f"{scratch}:/tmp:rw",
            "--pwd",
            cwd,
            image,
            *prlimit_argv(limits, "prlimit"),
            *inner,
        ]


RUNTIMES: dict[str, type[Runtime]] = {
    "bwrap": BwrapRuntime,
    "process": ProcessRuntime,
    "apptainer": ApptainerRuntime,
}


def get_runtime(name: str, config: SandboxConfig | None = None) -> Runtime:
    """Runtime by name (configured by `config`); ValueError lists the valid names."""
    if name not in RUNTIMES:
        raise ValueError(f"unknown sandbox runtime {name!r}; valid: {sorted(RUNTIMES)}")
    return RUNTIMES[name](config)


@lru_cache(maxsize=1)
def bwrap_available() -> bool:
    """True when bubblewrap is installed and can create its namespaces on this machine."""
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return False
    probe = [bwrap, "--unshare-net", "--unshare-pid", "--die-with-parent", "--ro-bind", "/", "/", "--", "true"]
    try:
        return subprocess.run(probe, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
