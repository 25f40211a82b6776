"""`bat doctor`: each area's finding from the programs it finds on PATH (stand-ins written per test), and the whole
command on a node without Slurm, Apptainer or GPUs: every missing item a problem with what to do, exit 2."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bat.config import load_config
from bat.doctor.checks import run_checks
from bat.doctor.gpu import check_gpus, driver_cuda, parse_gpus
from bat.doctor.slurm import check_slurm, parse_partitions
from bat.doctor.stack import compare
from bat.doctor.storage import check_model, check_storage
from bat.orchestrate.pins import parse_pins

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "configs" / "cluster" / "qwen9b_8xgpu.yaml"


def _program(folder: Path, name: str, script: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(0o755)


@pytest.fixture
def bin_dir(tmp_path, monkeypatch) -> Path:
    """A PATH of only this folder plus bwrap/setpriv/sh links: no Slurm, Apptainer or nvidia-smi unless a test
    writes a stand-in here."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for tool in ("sh", "bwrap", "setpriv"):
        found = shutil.which(tool)
        if found:
            (folder / tool).symlink_to(found)
    monkeypatch.setenv("PATH", str(folder))
    return folder


def _by_name(findings):
    return {f.name: f for f in findings}


def test_parsers():
    assert parse_partitions("cpu\ngpu*\n\n") == {"cpu", "gpu"}
    assert parse_gpus("0, NVIDIA H100 80GB HBM3, 81559\n1, NVIDIA H100 80GB HBM3, 81559\n")[1][2] == pytest.approx(
        79.65, abs=0.01
    )
    assert driver_cuda("| NVIDIA-SMI 580.65  Driver Version: 580.65  CUDA Version: 13.0 |") == "13.0"
    pins = parse_pins(["torch==2.13.0", "numpy>=2", 'vllm==0.32.0; extra == "vllm"'])
    assert pins == {"torch": "2.13.0", "vllm": "0.32.0"}
    assert compare({"torch": "2.13.0", "rich": "15.0.0"}, {"torch": "2.13.0+cpu", "rich": None}) == (["rich"], [])
    assert compare({"torch": "2.13.0"}, {"torch": "2.12.1"}) == ([], ["torch 2.12.1 (pinned 2.13.0)"])


def test_slurm_partitions_and_accounts_against_the_cluster(bin_dir):
    for name in ("sbatch", "squeue", "sacct", "scontrol"):
        _program(bin_dir, name, 'echo "slurm 22.05.8"')
    _program(bin_dir, "sinfo", 'case "$1" in --version) echo "slurm 22.05.8";; *) printf "debug*\\ncpu\\n";; esac')
    _program(bin_dir, "sacctmgr", 'echo "lab"')
    cfg = load_config(RECIPE, ["orchestrate.resources.rollout.additional={account: other}"])
    found = _by_name(check_slurm(cfg, True))
    assert found["slurm client"].status == "ok"
    assert found["slurm partitions"].status == "problem"
    assert "gpu (resources: evaluate, final_test, grpo, rollout, sft)" in found["slurm partitions"].seen
    assert "['cpu', 'debug']" in found["slurm partitions"].fix
    assert found["slurm accounts"].status == "problem" and "other" in found["slurm accounts"].seen
    cfg = load_config(RECIPE, [f"orchestrate.resources.{p}.partition=cpu" for p in cfg.orchestrate.resources])
    found = _by_name(check_slurm(cfg, True))
    assert found["slurm partitions"].status == "ok"
    assert found["slurm accounts"].status == "ok"


def test_gpu_memory_against_the_plan(bin_dir):
    banner = "echo '| NVIDIA-SMI 580.65  Driver Version: 580.65  CUDA Version: 13.0 |'"
    _program(bin_dir, "nvidia-smi", f'if [ -n "$1" ]; then echo "0, NVIDIA A100-SXM4-40GB, 40960"; else {banner}; fi')
    found = _by_name(check_gpus(load_config(RECIPE)))
    gpu = found["gpu memory"]
    assert gpu.status == "problem"  # the 9B plan needs more than a 40 GiB card holds
    assert "smallest 40.0 GiB; the plan assumes 80 GiB and needs" in gpu.seen
    assert "orchestrate.gpu_mem_gb to 40" in gpu.fix
    assert found["cuda build"].status == "problem"  # this machine's torch is the CPU build
    assert "CPU build" in found["cuda build"].seen


def test_storage_and_model(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"num_hidden_layers": 2}))
    cfg = load_config(RECIPE, [f"model.path={model}", f"orchestrate.container.scratch={tmp_path}"])
    found = _by_name(check_model(cfg) + check_storage(cfg, tmp_path / "state"))
    assert found["model path"].status == "problem" and "weight files: 0" in found["model path"].seen
    (model / "model.safetensors").write_bytes(b"x" * 10)
    assert _by_name(check_model(cfg))["model path"].status == "ok"
    assert found["scratch"].status in ("ok", "problem") and str(tmp_path) in found["scratch"].seen
    assert "a run wants" in found["state dir"].seen
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    if os.geteuid() != 0:  # root writes anywhere
        assert check_storage(cfg, locked / "state")[0].status == "problem"


def test_every_area_is_reported_on_a_node_without_slurm_apptainer_or_gpus(bin_dir, tmp_path):
    """The whole command as a user runs it: no traceback, each area named, the missing ones problems with what to do,
    exit 2; the same config with those areas skipped and a local executor has nothing left to fail."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BAT_STATE": str(tmp_path / "state")}
    argv = [sys.executable, "-m", "bat.cli.main", "doctor", "--config", str(RECIPE), "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    found = {f["name"]: f for f in json.loads(done.stdout)}
    for name in ("slurm client", "apptainer", "apptainer image", "gpus", "model path"):
        assert found[name]["status"] == "problem" and found[name]["fix"], name
    for name in ("user namespaces", "state dir", "scratch", "python stack", "model cache"):
        assert name in found
    skip = ["--skip", "gpus", "--skip", "model", "--skip", "storage", "--skip", "apptainer"]
    sets = ["--set", "orchestrate.executor=local"]
    done = subprocess.run([*argv, *sets, *skip], capture_output=True, text=True, env=env, cwd=tmp_path)
    statuses = {f["name"]: f["status"] for f in json.loads(done.stdout)}
    assert statuses["slurm client"] == "unused"
    assert done.returncode == (2 if "problem" in statuses.values() else 0), statuses


def test_run_checks_skips_areas(tmp_path):
    names = {f.name for f in run_checks(load_config(None), tmp_path, ("slurm", "gpus", "userns", "stack"))}
    assert names == {"apptainer", "model path", "model cache", "state dir", "scratch"}


def test_the_image_is_started_and_must_import_bats_stack(tmp_path):
    """Through the Apptainer stand-in (tests/slurm/fake_apptainer, bubblewrap): an image holding this Python and bat
    imports the stack; one without bat is a problem naming the import error."""
    from bat.doctor.container import check_apptainer

    if not shutil.which("bwrap"):
        pytest.skip("needs bubblewrap")
    site = [p for p in sys.path if p.endswith("site-packages") and not p.startswith(sys.prefix)]
    lines = ["/usr", "/etc/passwd", "/etc/group", "/etc/ld.so.cache", sys.base_prefix, *site]
    lines = [f"{p}\t{p}" for p in dict.fromkeys(lines) if os.path.exists(p)]
    lines += [f"{sys.prefix}\t/opt/venv", f"{ROOT / 'bat'}\t/opt/bat/bat"]
    good, bad = tmp_path / "good.sif", tmp_path / "bad.sif"
    good.write_text("\n".join([*lines, "env PYTHONPATH=/opt/bat"]) + "\n")
    bad.write_text("\n".join(lines[:-1]) + "\n")  # no bat source, no PYTHONPATH
    sets = [
        "orchestrate.container.enabled=true",
        f"orchestrate.container.apptainer={ROOT / 'tests' / 'slurm' / 'fake_apptainer'}",
        f"orchestrate.container.python=/opt/venv/bin/{Path(sys.executable).name}",
    ]
    found = _by_name(check_apptainer(load_config(None, [*sets, f"orchestrate.container.image={good}"])))
    assert found["apptainer"].status == "ok" and "stand-in" in found["apptainer"].seen
    assert found["apptainer image"].status == "ok" and "torch" in found["apptainer image"].seen, found
    found = _by_name(check_apptainer(load_config(None, [*sets, f"orchestrate.container.image={bad}"])))
    assert found["apptainer image"].status == "problem" and "No module named" in found["apptainer image"].seen
