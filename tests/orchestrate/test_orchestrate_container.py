"""The `apptainer exec` argv (Apptainer itself cannot run on these machines: only the argv is tested)."""

import shlex
import subprocess
from pathlib import Path

import pytest

from bat.config import load_config
from bat.config.orchestrate import ContainerConfig
from bat.orchestrate.container import apptainer_argv, submitit_python
from bat.orchestrate.executors import make_executor
from bat.state.layout import RunLayout


def _pairs(argv, flag):
    return [argv[i + 1] for i, word in enumerate(argv) if word == flag]


def test_argv_binds_state_and_scratch_and_sets_env(tmp_path):
    cfg = ContainerConfig(enabled=True, image="/img/bat.sif", binds=["/data:/data:ro"])
    argv = apptainer_argv(cfg, tmp_path / "state", ["python", "-m", "x"], scratch="/local/scratch")
    state = str((tmp_path / "state").resolve())
    assert argv[:4] == ["apptainer", "exec", "--nv", "--containall"]
    assert _pairs(argv, "--bind") == [f"{state}:{state}", "/local/scratch:/tmp", "/data:/data:ro"]
    assert _pairs(argv, "--env") == ["PYTHONNOUSERSITE=1", "HF_HOME=/tmp/hf_home", "HF_HUB_OFFLINE=1"]
    assert argv[argv.index("/img/bat.sif") + 1 :] == ["python", "-m", "x"]
    assert _pairs(argv, "--pwd") == [state]


def test_no_nv_and_bad_bind_and_empty_command(tmp_path):
    argv = apptainer_argv(ContainerConfig(nv=False), tmp_path, ["python"])
    assert "--nv" not in argv and "--containall" in argv
    with pytest.raises(ValueError, match="not 'src\\[:dst\\[:opts\\]\\]'"):
        apptainer_argv(ContainerConfig(binds=["a:b:c:d"]), tmp_path, ["python"])
    with pytest.raises(ValueError, match="empty command"):
        apptainer_argv(ContainerConfig(), tmp_path, [])


def test_submitit_python_hook_expands_scratch_in_bash(tmp_path):
    cfg = ContainerConfig(enabled=True, image="/img/my image.sif", apptainer="/bin/echo")
    hook = submitit_python(cfg, tmp_path)
    # run the hook line through bash exactly as sbatch would (apptainer replaced by echo)
    out = subprocess.run(
        ["bash", "-c", f"export SLURM_TMPDIR=/node/tmp; {hook} -u -m submitit.core._submit DIR"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "/node/tmp:/tmp" in out and "--containall" in out
    assert out[-5:] == ["python", "-u", "-m", "submitit.core._submit", "DIR"]
    assert shlex.quote("/img/my image.sif") in hook


def test_slurm_executor_uses_the_container_hook(tmp_path):
    cfg = load_config(
        None,
        [
            "orchestrate.executor=slurm",
            "orchestrate.container.enabled=true",
            "orchestrate.container.image=/img/bat.sif",
        ],
    )
    executor = make_executor(cfg, RunLayout(tmp_path), 1, "grpo")
    python = executor._executor.python
    assert python.startswith("apptainer exec --nv --containall --bind ")
    assert python.endswith("/img/bat.sif python")
    assert Path(tmp_path).resolve().as_posix() in python
