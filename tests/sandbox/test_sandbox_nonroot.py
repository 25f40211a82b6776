"""bwrap as an ordinary (non-root) user, as on a Slurm cluster: user namespace + per-namespace nproc."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

import bat
from bat.sandbox import bwrap_available

SYSTEM_PYTHON = "/usr/bin/python3"
SITE = next(p for p in sys.path if p.endswith("site-packages"))


def _system_python_matches() -> bool:
    if not Path(SYSTEM_PYTHON).exists():
        return False
    out = subprocess.run(
        [SYSTEM_PYTHON, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True
    )
    return out.stdout.strip() == str(tuple(sys.version_info[:2]))


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to become an unprivileged user"
)
def test_unprivileged_bwrap_contains_escapes() -> None:
    if not bwrap_available() or not _system_python_matches():
        pytest.skip(f"needs bwrap and {SYSTEM_PYTHON} of the running Python version (venv python lives under /root)")
    top = Path(tempfile.mkdtemp(prefix="bat-nonroot-"))
    try:
        ws, grader = top / "ws", top / "grader"
        (ws / "data").mkdir(parents=True)
        (ws / "data" / "x.txt").write_text("1")
        grader.mkdir()
        (grader / "truth.txt").write_text("hidden-label-42")
        os.chmod(top, 0o755)
        for path in (ws, ws / "data", ws / "data" / "x.txt"):
            os.chown(path, 65534, 65534)
        # Every level of the bomb waits for its children, so the call lasts until the nproc limit bites (or the
        # timeout): a bomb whose levels return at once lets the top shell exit before 32 processes exist.
        script = textwrap.dedent(f"""
            import json
            from bat.config.sandbox import SandboxConfig
            from bat.sandbox import Sandbox
            sb = Sandbox({str(ws)!r}, SandboxConfig(runtime="bwrap", python={SYSTEM_PYTHON!r}, timeout_s=2, nproc=32),
                         protected_paths=[{str(grader)!r}])
            out = {{}}
            for name, lang, code in [("grader", "bash", "cat {grader}/truth.txt"),
                                     ("bomb", "bash", "bomb() {{ bomb | bomb & wait; }}; bomb"),
                                     ("net", "python", "import socket; socket.socket().connect(('1.1.1.1', 80))")]:
                r = sb.execute_code(lang, code)
                out[name] = {{"flags": r.flags.raised(), "text": r.stdout + r.stderr}}
            out["next"] = sb.call_tool("bat.sandbox.tools:list_files", {{}}).result
            warm = Sandbox({str(ws)!r}, SandboxConfig(runtime="bwrap", python={SYSTEM_PYTHON!r}, timeout_s=2, nproc=32,
                                                    warm=True), protected_paths=[{str(grader)!r}])
            with warm:
                bomb = warm.execute_code("bash", "bomb() {{ bomb | bomb & wait; }}; bomb")
                out["warm_bomb"] = bomb.flags.raised()
                out["warm_next"] = warm.call_tool("bat.sandbox.tools:list_files", {{}}).result
            print(json.dumps(out))
        """)
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{SITE}:{Path(bat.__file__).resolve().parent.parent}"}
        done = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", SYSTEM_PYTHON, "-c", script],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            cwd="/",
        )
        assert done.returncode == 0, done.stderr[-2000:]
        out = json.loads(done.stdout.strip().splitlines()[-1])
        assert "access_outside" in out["grader"]["flags"] and "hidden-label-42" not in out["grader"]["text"]
        assert "nproc" in out["bomb"]["flags"]
        assert "network" in out["net"]["flags"]
        assert out["next"] == "data/x.txt (1 bytes)"
        assert "nproc" in out["warm_bomb"] and out["warm_next"] == "data/x.txt (1 bytes)"
    finally:
        shutil.rmtree(top, ignore_errors=True)
