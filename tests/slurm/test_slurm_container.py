"""On the real local Slurm, phases run inside a container stand-in (tests/slurm/fake_apptainer: bubblewrap with only
the image's paths and the binds visible, no network, no Slurm client): a path not bound is invisible, a configured
path is bound, the phases reach Slurm through bat's relay (the route queues round 1 from inside), and a USR2 to a
phase checkpoints and requeues it from inside the container."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_slurm_rounds import _config_file, _sbatch, _wait_finished

from bat.orchestrate.jobrecords import read_job_record
from bat.state.atomic import read_json
from bat.state.layout import RunLayout

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slurm


IMAGE_VENV, IMAGE_SRC = "/opt/venv", "/opt/bat"
"""Where the stand-in image holds this Python environment and bat's source, as the real image does
(`containers/bat.def`): never under /tmp, which Apptainer mounts afresh (and bat binds scratch over)."""


def _image_path(host: str) -> str:
    """The image path of a host path: this venv under IMAGE_VENV, the checkout under IMAGE_SRC, others unchanged."""
    for root, inside in ((sys.prefix, IMAGE_VENV), (str(REPO), IMAGE_SRC)):
        if host == root or host.startswith(root + os.sep):
            return inside + host[len(root) :]
    return host


def _image(tmp_path: Path) -> Path:
    """The stand-in image: /usr, a few /etc files, this Python (its base at the same path, the venv at /opt/venv and
    every other site directory it reads), bat's source and the toy phases under /opt/bat, and an %environment that
    puts them on PYTHONPATH. Lines `HOST<TAB>IMAGE` (tests/slurm/fake_apptainer)."""
    paths = ["/usr", *(f"/etc/{f}" for f in ("passwd", "group", "nsswitch.conf", "ld.so.cache"))]
    paths += [sys.base_prefix, sys.prefix, str(REPO / "bat"), str(REPO / "tests" / "orchestrate")]
    paths += [p for p in sys.path if p.endswith("site-packages") and not p.startswith(sys.prefix)]
    lines = [f"{p}\t{_image_path(p)}" for p in dict.fromkeys(p for p in paths if os.path.exists(p))]
    lines.append(f"env PYTHONPATH={IMAGE_SRC}{os.pathsep}{IMAGE_SRC}/tests/orchestrate")
    image = tmp_path / "bat.sif"
    image.write_text("\n".join(lines) + "\n")
    return image


def _image_python() -> str:
    """This interpreter as the stand-in image names it (`orchestrate.container.python`)."""
    return _image_path(str(Path(sys.prefix) / "bin" / Path(sys.executable).name))


def test_phases_in_the_container_reach_slurm_and_requeue(slurm_cluster, tmp_path, monkeypatch):
    secret, data, scratch = tmp_path / "not_bound.txt", tmp_path / "data", tmp_path / "scratch"
    secret.write_text("host only")
    data.mkdir()
    scratch.mkdir()
    layout = RunLayout(tmp_path / "state")
    monkeypatch.setenv("BAT_TOY_PROBE", os.pathsep.join([str(secret), str(data), str(layout.root), "/etc/slurm"]))
    monkeypatch.setenv("BAT_TOY_SLEEP", "1.0")
    monkeypatch.setenv("BAT_TOY_SLOW", "1:grpo")
    name = f"ctr{os.getpid()}"
    cfg, path = _config_file(
        tmp_path,
        name,
        extra=[
            "orchestrate.container.enabled=true",
            f"orchestrate.container.image={_image(tmp_path)}",
            f"orchestrate.container.apptainer={REPO / 'tests' / 'slurm' / 'fake_apptainer'}",
            f"orchestrate.container.python={_image_python()}",
            f"orchestrate.container.scratch={scratch}",
            "orchestrate.container.pass_env=['SLURM_*', 'SUBMITIT_*', 'BAT_*']",  # PYTHONPATH: the image's
            f"sandbox.code_paths=['{data}']",
        ],
    )
    _sbatch(path, layout.root, tmp_path)
    grpo = layout.phase_dir(1, "grpo")
    deadline = time.monotonic() + 120
    while not (grpo / "shard_000.jsonl").exists():  # round 1 was queued by round 0's route inside the container
        assert time.monotonic() < deadline, (layout.root / "events.log").read_text()[-3000:]
        time.sleep(0.2)
    subprocess.run(["scancel", "--signal=USR2", read_job_record(layout, 1, "grpo")["job_id"]], check=True)
    _wait_finished(cfg, layout, timeout_s=150)

    log = (layout.root / "events.log").read_text()
    assert "r00 route: job running" in log and "r01 driver: lease taken by slurm-job-" in log
    assert "r01 grpo: interrupted (preemption)" in log and log.count("r01 grpo: start") == 2
    probe = read_json(layout.phase_dir(0, "route") / "probe.json")
    assert probe["exists"] == {str(secret): False, str(data): True, str(layout.root): True, "/etc/slurm": False}
    assert probe["sbatch"].startswith("/tmp/bat-slurm-relay.")  # the relay's shim, not a Slurm client
    job = read_job_record(layout, 0, "route")["job_id"]
    assert probe["squeue_rc"] == 0 and probe["squeue"] == f"{job} RUNNING"
    # every job's wrapper removes its relay folder after the phase; the preempted grpo instance may be SIGKILLed by
    # Slurm (KillWait) before it can on a loaded machine, so at most that one folder may stay
    deadline = time.monotonic() + 60
    while len(list(scratch.glob("bat-slurm-relay.*"))) > 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(list(scratch.glob("bat-slurm-relay.*"))) <= 1, list(scratch.glob("bat-slurm-relay.*"))


def test_a_missing_configured_path_is_refused_before_queueing(slurm_cluster, tmp_path):
    """`run_round.sh` exits 2 naming the field and the path, with no traceback, and queues nothing."""
    name = f"ctrbad{os.getpid()}"
    _, path = _config_file(
        tmp_path,
        name,
        extra=[
            "orchestrate.container.enabled=true",
            f"orchestrate.container.image={_image(tmp_path)}",
            f"sandbox.code_paths=['{tmp_path}/missing']",
        ],
    )
    layout = RunLayout(tmp_path / "state")
    env = {**os.environ, "BAT_CONFIG": str(path), "BAT_STATE": str(layout.root)}
    out = subprocess.run(["./run_round.sh"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert f"sandbox.code_paths[0]='{tmp_path}/missing' does not exist on this host" in out.stderr
    assert "Traceback" not in out.stderr
    assert not list(layout.root.glob("jobs/round_*/*.job.json"))
