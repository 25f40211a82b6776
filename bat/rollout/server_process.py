"""An inference server process that bat starts on one checkpoint, waits for and stops again (vLLM, SGLang).

What every managed server shares: the interpreter of the environment holding the server (`resolve_python`), a free
port on 127.0.0.1, its own process group (stopping it kills the API server and every scheduler, engine-core and
worker process it spawned together), its output in a log file whose last lines are shown when it fails to come up,
a `/health` poll until it answers 200 or the start timeout passes, and a check that it reports the checkpoint it
was started on. Subclasses give the command line, the environment and that check.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from abc import ABC, abstractmethod
from pathlib import Path

SERVED_NAME = "policy"
"""The model name a managed server serves under (OpenAI-style requests name it; the checkpoint is checked apart)."""


class ServerStartError(RuntimeError):
    """A managed server could not be started, did not come up, or serves something else than asked."""


def importable_here(module: str) -> bool:
    """Whether this interpreter can import `module` (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def resolve_python(
    candidates: list[tuple[str, str | None]],
    *,
    here: str | None,
    local: Path | None,
    missing: str,
    error: type[ServerStartError] = ServerStartError,
) -> str:
    """The interpreter that runs a server: the first set value of `candidates` ((source, path), e.g. the config field
    then an environment variable; a set path that is no file raises naming its source), else `here` (this
    interpreter, when it imports the server), else `local` when it exists; else raises `error(missing)`."""
    for source, value in candidates:
        if value:
            if not Path(value).is_file():
                raise error(f"{source} = {value}: no such interpreter; {missing}")
            return value
    if here:
        return here
    if local is not None and local.is_file():
        return str(local)
    raise error(missing)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServerProcess(ABC):
    """One server process on `checkpoint`; `start()` waits until it serves it, `stop()` ends its process group.

    Subclasses set `label` (in messages), `timeout_key` (the config field of `start_timeout_s`) and `error`, and
    define `argv()`, `environment()` and `check_model()`."""

    label = "server"
    timeout_key = "start_timeout_s"
    error: type[ServerStartError] = ServerStartError

    def __init__(self, checkpoint: str | Path, *, start_timeout_s: float, port: int = 0) -> None:
        self.checkpoint = str(Path(checkpoint).resolve())
        self.start_timeout_s = start_timeout_s
        self.fixed_port = port
        """0 = a free port chosen at each start."""
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.log_path: Path | None = None
        self.start_seconds = 0.0
        """Wall seconds from spawning the server until it answered with the right model."""

    @property
    def root_url(self) -> str:
        """`http://127.0.0.1:PORT` (no API prefix)."""
        return f"http://127.0.0.1:{self.port}"

    @abstractmethod
    def argv(self) -> list[str]:
        """The server command line (reads `self.port`, set before the spawn)."""

    def environment(self) -> dict[str, str]:
        """The server's environment: this process's, offline, without bat's venv on PYTHONPATH."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "DO_NOT_TRACK": "1"})
        return env

    @abstractmethod
    def check_model(self) -> None:
        """Raise `error` unless the running server reports `checkpoint`."""

    def start(self) -> ServerProcess:
        """Spawn the server in its own process group and wait for `/health` (`start_timeout_s`), then check the model;
        raises `error` with the log's tail (the process group is stopped, the log kept)."""
        self.port = self.fixed_port or free_port()
        fd, name = tempfile.mkstemp(prefix=f"bat-{self.label.lower()}-", suffix=".log")
        self.log_path = Path(name)
        t0 = time.monotonic()
        with os.fdopen(fd, "wb") as log:
            self.proc = subprocess.Popen(
                self.argv(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.environment(),
                start_new_session=True,
            )
        try:
            self._wait_healthy(t0)
            self.check_model()
        except BaseException:
            self.stop(keep_log=True)
            raise
        self.start_seconds = time.monotonic() - t0
        return self

    def _wait_healthy(self, t0: float) -> None:
        assert self.proc is not None
        while True:
            code = self.proc.poll()
            if code is not None:
                raise self.error(
                    f"{self.label} server on {self.checkpoint} exited with code {code} during start-up; "
                    f"last lines of {self.log_path}:\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(f"{self.root_url}/health", timeout=5) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError, TimeoutError):
                pass
            if time.monotonic() - t0 > self.start_timeout_s:
                raise self.error(
                    f"{self.label} server on {self.checkpoint} did not answer /health within "
                    f"{self.start_timeout_s:.0f} s ({self.timeout_key}); last lines of {self.log_path}:\n"
                    f"{self.log_tail()}"
                )
            time.sleep(0.5)

    def log_tail(self, lines: int = 20) -> str:
        """The last `lines` lines of the server's log."""
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        text = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def stop(self, keep_log: bool = False) -> None:
        """Terminate the server's whole process group (SIGTERM, then SIGKILL after 20 s); idempotent."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=20)
            except ProcessLookupError:
                pass
        if proc is not None:
            try:  # schedulers and workers share the group; make sure none outlives the server
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if not keep_log and self.log_path is not None:
            self.log_path.unlink(missing_ok=True)
