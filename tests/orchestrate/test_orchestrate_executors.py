"""Executors and per-phase resources from config; preflight refuses bad launches."""

from pathlib import Path

import pytest
import toy_phases

from bat.config import load_config
from bat.orchestrate import executors, preflight
from bat.orchestrate.executors import make_executor, resource_parameters
from bat.state.layout import RunLayout


def test_slurm_parameters_come_from_the_phase_resources(tmp_path):
    cfg = load_config(
        None,
        [
            "orchestrate.executor=slurm",
            "orchestrate.signal_delay_s=120",
            "orchestrate.max_timeouts=5",
            "orchestrate.resources.grpo.partition=gpu",
            "orchestrate.resources.grpo.gpus=8",
            "orchestrate.resources.grpo.nodes=2",
            "orchestrate.resources.grpo.launcher=tasks",
            "orchestrate.resources.grpo.mem_gb=400",
            "orchestrate.resources.grpo.time_min=240",
            "orchestrate.resources.grpo.additional={account: lab}",
        ],
    )
    ex = make_executor(cfg, RunLayout(tmp_path), 3, "grpo", dependency=["11", "12"])._executor
    p = ex.parameters
    assert p["partition"] == "gpu" and p["gpus_per_node"] == 8 and p["nodes"] == 2
    assert p["ntasks_per_node"] == 8 and p["mem"] == "400GB" and p["time"] == 240
    assert p["signal_delay_s"] == 120 and p["dependency"] == "afterok:11:12"
    assert p["additional_parameters"] == {"kill-on-invalid-dep": "yes", "requeue": True, "account": "lab"}
    assert p["job_name"] == "local.r03.grpo" and ex.max_num_timeout == 5
    assert ex.folder == (tmp_path / "jobs" / "round_03" / "grpo" / "%j").resolve()


def test_local_and_debug_ignore_slurm_only_resources():
    cfg = load_config(None, ["orchestrate.resources.sft.partition=gpu"])
    local = resource_parameters(cfg, "sft", "local")
    assert local == {"timeout_min": 60, "name": "local.r00.sft", "tasks_per_node": 1}
    assert resource_parameters(cfg, "sft", "debug", 2) == {"timeout_min": 60, "name": "local.r02.sft"}
    with pytest.raises(KeyError, match="unknown phase 'train'"):
        resource_parameters(cfg, "train", "local")


def test_auto_picks_slurm_only_when_sbatch_exists(monkeypatch):
    cfg = load_config(None, ["orchestrate.executor=auto"])
    monkeypatch.setattr(executors.shutil, "which", lambda name: None)
    assert executors.executor_kind(cfg) == "local"
    monkeypatch.setattr(executors.shutil, "which", lambda name: "/usr/bin/sbatch")
    assert executors.executor_kind(cfg) == "slurm"


def test_preflight_lists_every_problem_before_queueing(monkeypatch):
    cfg = toy_phases.toy_config(
        "slurm",
        rounds=1,
        extra=[
            "orchestrate.resources.sft.partition=gpu-a100",
            "orchestrate.phase_overrides.evaluate=no_such_module_xyz:evaluate",
        ],
    )
    monkeypatch.setattr(preflight.shutil, "which", lambda name: "/usr/bin/sbatch")
    monkeypatch.setattr(preflight, "slurm_partitions", lambda: ["cpu", "debug"])
    with pytest.raises(preflight.PreflightError) as info:
        preflight.preflight(cfg, 0)
    text = str(info.value)
    assert "refusing to queue round 0" in text
    assert "orchestrate.resources.sft.partition='gpu-a100' does not exist; valid: ['cpu', 'debug']" in text
    assert "evaluate: phase target 'no_such_module_xyz:evaluate'" in text
    assert "beyond the round budget" in "\n".join(preflight.preflight_problems(cfg, 2))
    monkeypatch.setattr(preflight.shutil, "which", lambda name: None)
    assert any("`sbatch` is not on PATH" in p for p in preflight.preflight_problems(cfg, 1))


def _job_env(names):
    import os

    return {name: os.environ.get(name) for name in names}


def test_a_phase_env_is_exported_in_its_local_job_only(tmp_path):
    cfg = load_config(
        None, ["orchestrate.executor=local", "orchestrate.resources.sft.env={BAT_TEST_PIN: 'AVX2,STRICT'}"]
    )
    params = resource_parameters(cfg, "sft", "local")
    assert params["local_setup"] == ["export BAT_TEST_PIN=AVX2,STRICT"]  # shlex-quoted when it needs it
    assert "local_setup" not in resource_parameters(cfg, "grpo", "local")  # other phases keep the driver's env
    assert resource_parameters(cfg, "sft", "debug") == {"timeout_min": 60, "name": "local.r00.sft"}
    job = make_executor(cfg, RunLayout(tmp_path), 0, "sft").submit(_job_env, ["BAT_TEST_PIN"])
    assert job.result() == {"BAT_TEST_PIN": "AVX2,STRICT"}  # seen by the job's Python, set before it started


def test_a_phase_env_reaches_the_slurm_script_and_the_container():
    cfg = load_config(
        None,
        [
            "orchestrate.executor=slurm",
            "orchestrate.resources.sft.env={MKL_CBWR: 'AVX2,STRICT', ATEN_CPU_CAPABILITY: avx2}",
            "orchestrate.container.enabled=true",
            "orchestrate.container.image=/images/bat.sif",
        ],
    )
    params = resource_parameters(cfg, "sft", "slurm")
    assert params["slurm_setup"] == ["export ATEN_CPU_CAPABILITY=avx2", "export MKL_CBWR=AVX2,STRICT"]
    from bat.orchestrate.container import container_argv

    argv = container_argv(cfg, RunLayout("/tmp/bat-env-test"), ["python"], ["ATEN_CPU_CAPABILITY", "MKL_CBWR"])
    passed = next(a for a in argv if a.startswith("BAT_CONTAINER_PASS_ENV="))
    assert passed.split("=", 1)[1].split()[-2:] == ["ATEN_CPU_CAPABILITY", "MKL_CBWR"]


@pytest.mark.parametrize("name", ["1X", "A-B", ""])
def test_a_bad_env_name_is_refused(name):
    from bat.config.load import ConfigError

    with pytest.raises(ConfigError, match="not an environment variable name"):
        load_config(None, [f"orchestrate.resources.sft.env={{'{name}': x}}"])


RECORDED_DIGEST = "4c128e4708907d6b"
"""`python -m bat.perf.numerics` under arms_cpu's SFT pin, with the vendor shim: an Intel Xeon (AVX2, AVX-512, AMX;
`0460dfa`, 2026-12-05) and an AMD EPYC family 26 model 2 (Zen 5, AVX2, AVX-512, no AMX; `3fe371a`, 2026-12-06)."""


def _pinned_fingerprint():
    from bat.perf.numerics import fingerprint, kernel_environment

    return fingerprint(), kernel_environment()


@pytest.mark.skipif(
    "avx2" not in Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else True,
    reason="the pin selects MKL's AVX2 branch",
)
def test_the_pinned_sft_job_computes_the_recorded_fingerprint_on_this_cpu_kind(tmp_path, monkeypatch):
    """`configs/experiments/arms_cpu.yaml`'s SFT pin, with the MKL vendor shim the job preloads, computes the digest
    recorded on an Intel Xeon and an AMD EPYC (`RECORDED_DIGEST`): the bootstrap rebuilds bit-identically on either
    vendor. Without the shim, MKL on an AMD CPU ignores MKL_CBWR's branch. The job inherits what the test process
    holds, so the test hands it variables that move MKL off the branch (`mkl_vendor.BRANCH_OVERRIDES`; an inherited
    `MKL_ENABLE_INSTRUCTIONS=AVX512` computes 19506006...) and a dynamic thread count: the pinned job must clear them.
    One job, no retry: the fingerprint runs the training engine's warm-up step first (`warm_optimizer_kernels`),
    without which ~1 fresh process in 10 computed `1bc04903548f6fec` (its first AdamW step)."""
    from bat.orchestrate.mkl_vendor import BRANCH_COMPANIONS, BRANCH_OVERRIDES, shim_path

    for name in BRANCH_OVERRIDES:
        monkeypatch.setenv(name, "AVX512" if name == "MKL_ENABLE_INSTRUCTIONS" else "5")
    for name in BRANCH_COMPANIONS:
        monkeypatch.setenv(name, "TRUE")
    pin = "{MKL_CBWR: 'AVX2,STRICT', ATEN_CPU_CAPABILITY: avx2, ONEDNN_MAX_CPU_ISA: AVX2, OMP_NUM_THREADS: '2'}"
    cfg = load_config(None, ["orchestrate.executor=local", f"orchestrate.resources.sft.env={pin}"])
    params = resource_parameters(cfg, "sft", "local")
    assert params["local_setup"][-1].startswith(f"export LD_PRELOAD={shim_path()}")
    executor = make_executor(cfg, RunLayout(tmp_path), 0, "sft")
    digest, seen = executor.submit(_pinned_fingerprint).result()
    assert seen["LD_PRELOAD"].split(":")[0] == str(shim_path())
    assert not set(BRANCH_OVERRIDES) & set(seen), seen
    assert {name: seen.get(name) for name in BRANCH_COMPANIONS} == BRANCH_COMPANIONS
    assert digest == RECORDED_DIGEST, f"the pinned job computed {digest}; its kernel environment: {seen}"


def test_only_a_pinned_mkl_branch_preloads_the_shim():
    from bat.orchestrate.executors import mkl_vendor_setup

    assert mkl_vendor_setup({"ATEN_CPU_CAPABILITY": "avx2"}) == []
    assert mkl_vendor_setup({"MKL_CBWR": "COMPATIBLE"}) == []
    assert mkl_vendor_setup({"MKL_CBWR": "auto"}) == []
    *pins, line = mkl_vendor_setup({"MKL_CBWR": "AVX2,STRICT"})
    assert pins == [
        "unset MKL_ENABLE_INSTRUCTIONS MKL_DEBUG_CPU_TYPE",
        "export MKL_DYNAMIC=FALSE",
        "export OMP_DYNAMIC=FALSE",
    ]
    assert mkl_vendor_setup({"MKL_CBWR": "AVX2,STRICT", "MKL_DYNAMIC": "TRUE"})[1:-1] == ["export OMP_DYNAMIC=FALSE"]
    assert line.startswith("export LD_PRELOAD=") and line.endswith("${LD_PRELOAD:+:$LD_PRELOAD}")
