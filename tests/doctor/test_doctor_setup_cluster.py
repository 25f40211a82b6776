"""`scripts/setup_cluster.sh` as a user without root or sudo: a driver-only venv in a copy of the checkout the user
owns, with apt-get, dpkg-query and sudo replaced by stand-ins that record a call and fail; then that user's
`bat doctor` runs without a traceback. Needs root (to create the user) and `runuser`; ~40 s with a warm pip cache."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
USER = "batsetup"
FORBIDDEN = ("apt-get", "apt", "dpkg-query", "dpkg", "sudo")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("runuser"), reason="needs root and runuser"),
]


def _user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "-m", "-s", "/bin/bash", USER], check=True)
        return pwd.getpwnam(USER)


def _copy_checkout(dest: Path) -> None:
    """The checkout's tracked and untracked, not ignored files (what a clone would hold, plus work in progress)."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    archive = dest / "checkout.tar"
    with tarfile.open(archive, "w") as tar:
        for name in filter(None, listed.split("\0")):
            if (ROOT / name).exists():
                tar.add(ROOT / name, arcname=name, recursive=False)
    with tarfile.open(archive) as tar:
        tar.extractall(dest / "bat", filter="tar")
    archive.unlink()


def test_a_user_without_root_or_sudo_sets_up_the_cluster_path():
    user = _user()
    work = Path(tempfile.mkdtemp(prefix="bat-setup-", dir="/tmp"))
    try:
        _copy_checkout(work)
        trap = work / "trap"
        trap.mkdir()
        for name in FORBIDDEN:
            (trap / name).write_text(f'#!/bin/sh\necho "{name} $*" >> {work}/forbidden.log\nexit 1\n')
            (trap / name).chmod(0o755)
        subprocess.run(["chown", "-R", f"{user.pw_uid}:{user.pw_gid}", str(work)], check=True)
        work.chmod(0o755)
        env = ["env", "-i", f"HOME={user.pw_dir}", f"PATH={trap}:/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"]
        as_user = ["runuser", "-u", USER, "--", *env]
        sudo = subprocess.run([*as_user, "sh", "-c", "sudo -n true"], capture_output=True, text=True)
        assert sudo.returncode != 0  # the user has no sudo (the stand-in, or none at all)
        (work / "forbidden.log").unlink(missing_ok=True)
        checkout = work / "bat"
        done = subprocess.run(
            [*as_user, "bash", "scripts/setup_cluster.sh", "--driver-only"],
            cwd=checkout,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "skipped" in done.stdout and "BAT_SKIP_VLLM=1" in done.stdout
        assert not (work / "forbidden.log").exists(), (work / "forbidden.log").read_text()
        assert (checkout / ".venv" / "bin" / "bat").exists()
        assert pwd.getpwuid((checkout / ".venv").stat().st_uid).pw_name == USER
        again = subprocess.run(
            [*as_user, "bash", "scripts/setup_cluster.sh", "--driver-only"],
            cwd=checkout,
            capture_output=True,
            text=True,
        )
        assert again.returncode == 0 and "is current" in again.stdout
        doctor = subprocess.run(
            [*as_user, ".venv/bin/bat", "doctor", "--config", "configs/cluster/qwen9b_8xgpu.yaml", "--skip", "gpus"],
            cwd=checkout,
            capture_output=True,
            text=True,
        )
        assert doctor.returncode == 2 and "Traceback" not in doctor.stderr, doctor.stderr
        assert "ok      python stack" in doctor.stdout and "ok      user namespaces" in doctor.stdout, doctor.stdout
    finally:
        shutil.rmtree(work, ignore_errors=True)
