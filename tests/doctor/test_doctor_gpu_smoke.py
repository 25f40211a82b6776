"""`scripts/gpu_smoke.sh --print`: the one-job smoke round's script, on a GPU (NCCL, CUDA policy and engine, one GPU
asked) or on the CPU, in the image (contained, node-local scratch over /tmp expanded in the job) or in the venv; the
script it prints is valid bash. (`--cpu` was run end to end on the local Slurm: docs/cluster.md.)"""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _print(*args: str) -> str:
    done = subprocess.run(
        ["bash", "scripts/gpu_smoke.sh", "--print", "--state", "/tmp/smoke state", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    subprocess.run(["bash", "-n"], input=done.stdout, text=True, check=True)
    return done.stdout


def test_the_gpu_job_runs_doctor_then_the_smoke_round_on_cuda_in_the_image():
    job = _print("--image", "/images/bat.sif", "--engine", "vllm")
    assert "doctor --config configs/cluster/qwen9b_8xgpu.yaml" in job
    assert 'apptainer exec --nv --containall --bind "$SCRATCH":/tmp' in job
    assert "SCRATCH=${SLURM_TMPDIR:-/tmp}" in job
    for setting in ("rollout.device=cuda", "sft.deepspeed.backend=nccl", "rollout.engine=vllm"):
        assert f"--set {setting}" in job
    assert r"--state /tmp/smoke\ state/run" in job


def test_the_cpu_job_asks_no_gpu_and_runs_in_the_venv():
    job = _print("--cpu")
    assert "rollout.device=cuda" not in job and "apptainer" not in job
    assert "run --config configs/smoke.yaml" in job


def test_bad_options_are_refused():
    done = subprocess.run(["bash", "scripts/gpu_smoke.sh", "--engine", "tgi"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and "valid: hf, vllm, sglang" in done.stderr
