"""The real local Slurm cluster (scripts/slurm_up.sh) and helpers shared by the Slurm tests.

Without a cluster the tests are skipped, or fail with instructions when BAT_REQUIRE_SLURM=1 (CI).
"""

import os
import shutil
import subprocess

import pytest


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
def _toy_phases_in_jobs(toy_phases_env):
    """Toy phases importable in every job (sbatch exports the environment): `toy_phases_env`, tests/conftest.py."""
