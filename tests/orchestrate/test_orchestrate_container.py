"""The `apptainer exec` argv (Apptainer itself cannot run on these machines: only the argv is tested)."""

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from bat.config import load_config
from bat.config.orchestrate import ContainerConfig
from bat.orchestrate.container import apptainer_argv, container_argv, submitit_python
from bat.orchestrate.container_paths import container_problems
from bat.orchestrate.executors import make_executor
from bat.state.layout import RunLayout

REPO = Path(__file__).resolve().parents[2]


def _pairs(argv, flag):
    return [argv[i + 1] for i, word in enumerate(argv) if word == flag]


def test_argv_binds_state_and_scratch_and_sets_env(tmp_path):
    cfg = ContainerConfig(enabled=True, image="/img/bat.sif", binds=["/data:/data:ro"])
    argv = apptainer_argv(cfg, tmp_path / "state", ["python", "-m", "x"], scratch="/local/scratch")
    state = str((tmp_path / "state").resolve())
    assert argv[:4] == ["apptainer", "exec", "--nv", "--containall"]
    assert _pairs(argv, "--bind") == ["/local/scratch:/tmp", f"{state}:{state}", "/data:/data:ro"]
    assert _pairs(argv, "--env") == [
        "PYTHONNOUSERSITE=1",
        "HF_HOME=/tmp/hf_home",
        "HF_HUB_OFFLINE=1",
        "BAT_CONTAINER_IMAGE=/img/bat.sif",
    ]
    assert argv[argv.index("/img/bat.sif") + 1 :] == ["python", "-m", "x"]
    assert _pairs(argv, "--pwd") == [state]


def test_no_nv_and_bad_bind_and_empty_command(tmp_path):
    argv = apptainer_argv(ContainerConfig(nv=False), tmp_path, ["python"])
    assert "--nv" not in argv and "--containall" in argv
    with pytest.raises(ValueError, match="not 'src\\[:dst\\[:opts\\]\\]'"):
        apptainer_argv(ContainerConfig(binds=["a:b:c:d"]), tmp_path, ["python"])
    with pytest.raises(ValueError, match="empty command"):
        apptainer_argv(ContainerConfig(), tmp_path, [])


def _container_config(tmp_path, *extra):
    image = tmp_path / "my image.sif"
    image.write_text("")
    model = tmp_path / "models" / "m"
    model.mkdir(parents=True, exist_ok=True)
    return load_config(
        None,
        [
            "orchestrate.executor=slurm",
            "orchestrate.container.enabled=true",
            f"orchestrate.container.image={image}",
            f"model.path={model}",
            *extra,
        ],
    )


def test_submitit_python_hook_runs_the_wrapper_and_expands_scratch_in_bash(tmp_path):
    cfg = _container_config(tmp_path, "orchestrate.container.apptainer=/bin/echo")
    layout = RunLayout(tmp_path / "state")
    hook = submitit_python(cfg, layout)
    assert layout.container_exec.is_file()
    # run the hook line through bash exactly as sbatch would (apptainer replaced by echo, no relay needed by echo)
    out = subprocess.run(
        ["bash", "-c", f"export SLURM_TMPDIR={tmp_path}; {hook} -u -m submitit.core._submit DIR"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert f"{tmp_path}:/tmp" in out and "--containall" in out
    assert f"{tmp_path}/models/m:{tmp_path}/models/m" in out  # model.path bound at the same path
    assert out[-5:] == ["python", "-u", "-m", "submitit.core._submit", "DIR"]
    assert any(word.startswith("BAT_SLURM_RELAY=/tmp/bat-slurm-relay.") for word in out)
    assert shlex.quote(f"{tmp_path}/my image.sif") in hook
    assert not list(tmp_path.glob("bat-slurm-relay.*"))  # the relay folder is removed when the container exits


def test_relative_or_missing_configured_paths_are_refused_naming_the_field(tmp_path):
    cfg = _container_config(tmp_path, f"orchestrate.container.binds=['{tmp_path}/nope:/data']")
    assert container_problems(cfg) == [
        f"orchestrate.container.binds[0]='{tmp_path}/nope' does not exist on this host; create it or fix the path"
    ]
    cfg = _container_config(tmp_path, "model.path=models/m", "sandbox.code_paths=['/no/such']")
    problems = container_problems(cfg)
    assert len(problems) == 2 and problems[0].startswith("model.path='models/m' is relative")
    assert problems[1].startswith("sandbox.code_paths[0]='/no/such' does not exist on this host")
    assert container_problems(load_config(None, ["model.path=rel"])) == []  # container off: nothing to bind


def test_slurm_executor_uses_the_container_hook(tmp_path):
    cfg = _container_config(tmp_path)
    executor = make_executor(cfg, RunLayout(tmp_path / "state"), 1, "grpo")
    python = executor._executor.python
    assert python.startswith("env 'BAT_CONTAINER_PASS_ENV=SLURM_* SUBMITIT_* ")
    assert " apptainer exec --nv --containall --bind " in python
    assert python.endswith('/bin/sh -c \'PATH="$BAT_SLURM_RELAY/bin:$PATH"; export PATH; exec "$@"\' bat-relay python')


def test_the_relay_replays_host_slurm_commands_inside_the_container_stand_in(tmp_path):
    """Inside the bubblewrap stand-in for `apptainer exec` (no Slurm client, no network), `sbatch` and `scontrol`
    run on the host side: argv with spaces, stdout, stderr and exit codes come back; SLURM_* (commas kept) is passed."""
    fake_bin = tmp_path / "host_bin"
    fake_bin.mkdir()
    (fake_bin / "sbatch").write_text('#!/bin/sh\necho "Submitted batch job 42 ($# args: $2)"; echo warn >&2\n')
    (fake_bin / "scontrol").write_text("#!/bin/sh\necho boom >&2; exit 3\n")
    for tool in fake_bin.iterdir():
        tool.chmod(0o755)
    (tmp_path / "scratch").mkdir()
    cfg = _container_config(
        tmp_path,
        f"orchestrate.container.apptainer={REPO / 'tests' / 'slurm' / 'fake_apptainer'}",
        f"orchestrate.container.scratch={tmp_path / 'scratch'}",
    )
    (tmp_path / "my image.sif").write_text("/usr\n/etc/passwd\n/etc/group\n/etc/ld.so.cache\n")
    inside = 'sbatch --x "a b"; echo "rc=$?"; scontrol requeue 7; echo "rc=$?"; echo "job=$SLURM_JOB_NODELIST"'
    inside += '; test -e /etc/slurm || echo "no slurm config"; test -e /run/munge || echo "no munge"'
    argv = container_argv(cfg, RunLayout(tmp_path / "state"), ["bash", "-c", inside])
    env = {**os.environ, "PATH": f"{fake_bin}:{os.environ['PATH']}", "SLURM_JOB_NODELIST": "n[1-2],n5"}
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "Submitted batch job 42 (2 args: a b)",
        "rc=0",
        "rc=3",
        "job=n[1-2],n5",
        "no slurm config",
        "no munge",
    ]
    assert "warn" in out.stderr and "boom" in out.stderr
    assert not list((tmp_path / "scratch").glob("bat-slurm-relay.*"))


def test_a_relay_folder_left_by_a_killed_wrapper_is_swept_by_the_next_one(tmp_path):
    """A wrapper SIGKILLed before its cleanup leaves its relay folder; the next wrapper on this host removes folders
    whose owner process is gone (or whose pid was reused: another start time), and keeps a live wrapper's."""
    cfg = _container_config(tmp_path, "orchestrate.container.apptainer=/bin/true")
    layout = RunLayout(tmp_path / "state")
    hook = submitit_python(cfg, layout)
    host = os.uname().nodename
    dead = subprocess.Popen(["true"])
    dead.wait()
    live = subprocess.Popen(["sleep", "60"])
    try:
        live_start = Path(f"/proc/{live.pid}/stat").read_text().rsplit(") ", 1)[1].split()[19]
        folders = {
            "dead": f"{host} {dead.pid} 123",
            "reused": f"{host} {live.pid} 1",
            "live": f"{host} {live.pid} {live_start}",
            "other-host": f"not-{host} {dead.pid} 1",
        }
        for name, owner in folders.items():
            (tmp_path / f"bat-slurm-relay.{name}").mkdir()
            (tmp_path / f"bat-slurm-relay.{name}" / "owner").write_text(owner + "\n")
        subprocess.run(["bash", "-c", f"export SLURM_TMPDIR={tmp_path}; {hook} -c pass"], check=True, timeout=60)
    finally:
        live.kill()
        live.wait()
    left = sorted(p.name.split(".", 1)[1] for p in tmp_path.glob("bat-slurm-relay.*"))
    assert left == ["live", "other-host"]
