"""The real local Slurm cluster (scripts/slurm_up.sh) and helpers shared by the Slurm tests.

Without a cluster the tests are skipped, or fail with instructions when BAT_REQUIRE_SLURM=1 (CI).
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOY_DIR = REPO / "tests" / "orchestrate"
if str(TOY_DIR) not in sys.path:  # `import toy_phases` in the test module at collection time
    sys.path.insert(0, str(TOY_DIR))


def slurm_problem() -> str | None:
    """Why the local cluster is not usable, or None when `sinfo` shows an idle node and `sacct` answers."""
    if shutil.which("sbatch") is None:
        return "sbatch not found"
    try:
        state = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=10).stdout.split()
        acct = subprocess.run(["sacct", "-n", "-X", "-S", "now-1minute"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"Slurm commands failed: {exc}"
    if not set(state) & {"idle", "mixed", "allocated"}:
        return f"no usable node (sinfo states: {state or 'none'})"
    if acct.returncode != 0:
        return f"sacct fails (slurmdbd down?): {acct.stderr.strip()}"
    return None


@pytest.fixture(scope="session")
def slurm_cluster():
    """Require the cluster from scripts/slurm_up.sh; skip (or fail when BAT_REQUIRE_SLURM=1) otherwise."""
    problem = slurm_problem()
    if problem:
        message = f"local Slurm cluster is not up ({problem}); start it with `sudo scripts/slurm_up.sh`"
        if os.environ.get("BAT_REQUIRE_SLURM") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return True


@pytest.fixture(autouse=True)
def toy_phases_importable(monkeypatch):
    """Toy phases importable here and in every job (sbatch exports the environment)."""
    monkeypatch.syspath_prepend(str(TOY_DIR))
    paths = [str(TOY_DIR), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(dict.fromkeys(paths)))
    monkeypatch.setenv("BAT_TOY_SLEEP", "0")
    monkeypatch.setenv("BAT_PYTHON", sys.executable)
    yield
