"""`model.dtype` from load to export: the trainers load and train in it (DeepSpeed bf16 keeps fp32 master weights),
the exports are written in it, GRPO's KL reference loads in it, and a precision that cannot run is refused."""

from __future__ import annotations

import json
import math
import struct
import subprocess
import sys

import pytest
import torch

from bat.config import ConfigError, load_config
from bat.config.deepspeed import DeepSpeedConfig, training_precision
from bat.config.grpo import GrpoConfig
from bat.config.sft import SftConfig
from bat.policy.loader import load_model, load_tokenizer
from bat.state.atomic import read_json
from bat.state.jsonl import read_jsonl
from bat.train.engine import resolve_precision
from bat.train.grpo import train_grpo
from bat.train.grpo_data import build_items
from bat.train.sft import train_sft
from bat.train.sft_data import prepare_sft

STEP1_TOLERANCE = 0.005
"""Relative |bf16 - fp32| of the first step's loss. Both forwards see the same weights (bf16-rounded in one), so only
bf16 arithmetic differs: 8 significant bits, 2^-9 ~ 0.2% relative rounding per value; measured ~2e-5 on the tiny
model and 0.6% on SmolLM2-135M (more layers, a 49k vocabulary)."""
STEP_TOLERANCE = 0.05
"""Relative |bf16 - fp32| of every later step's loss (measured at most 1.9% on the tiny model at lr 3e-3). The
fp32 master weights take each AdamW update in full, but the bf16 weights the forward sees are their rounding: an
update below half a bf16 ulp of a weight (~2^-9 of its size) stays invisible until the master has gathered enough
of them, so the bf16 run learns a little slower (much slower when lr is far below 2^-9 x the weights: SmolLM2-135M at
lr 1e-4 saw only ~30% of the fp32 update after 2 steps)."""


def safetensors_dtypes(folder) -> set[str]:
    """Dtypes of every tensor in `folder/model.safetensors`, read from its header."""
    with open(folder / "model.safetensors", "rb") as handle:
        size = struct.unpack("<Q", handle.read(8))[0]
        header = json.loads(handle.read(size))
    return {entry["dtype"] for key, entry in header.items() if key != "__metadata__"}


def test_training_precision_follows_model_dtype_and_refuses_what_cannot_run():
    bf16 = load_config(None, ["model.dtype=bfloat16"])
    assert training_precision(bf16.sft.deepspeed, bf16.model.dtype) == "bf16"
    assert training_precision(load_config(None, []).grpo.deepspeed, "float32") == "fp32"
    load_config(None, ["model.dtype=bfloat16", "grpo.deepspeed.precision=bf16"])  # stating the same one is fine
    mismatch = r"sft.deepspeed.precision=fp32 does not match model.dtype=bfloat16.*valid: .*unset or bf16"
    with pytest.raises(ConfigError, match=mismatch):
        load_config(None, ["model.dtype=bfloat16", "sft.deepspeed.precision=fp32"])
    with pytest.raises(ConfigError, match="grpo.deepspeed.precision=bf16 does not match model.dtype=float32"):
        load_config(None, ["grpo.deepspeed.precision=bf16"])
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"valid on this machine \(no CUDA\): \['float32', 'bfloat16'\]"):
            resolve_precision(DeepSpeedConfig(), "float16", "sft.deepspeed")
    assert resolve_precision(DeepSpeedConfig(), "bfloat16", "sft.deepspeed") == "bf16"


def _sft(model, data, root, dtype):
    cfg = SftConfig(
        steps=6,
        lr=3e-3,
        warmup_ratio=0.0,
        global_batch=8,
        val_every=6,
        checkpoint_every=100,
        keep_checkpoints=1,
        deepspeed=DeepSpeedConfig(micro_batch_per_rank=8),
    )
    out = train_sft(
        model,
        data,
        cfg,
        seed=3,
        ckpt_root=root / "ck",
        export_dir=root / "hf",
        metrics_path=root / "m.jsonl",
        dtype=dtype,
    )
    return out, [m["loss"] for m in read_jsonl(root / "m.jsonl") if "loss" in m]


def test_bf16_sft_tracks_fp32_keeps_fp32_masters_and_exports_bf16(tiny_dir, sft_rows, tmp_path):
    data = prepare_sft(sft_rows(32, 1), sft_rows(8, 2, "validation"), load_tokenizer(tiny_dir), 256, tools=[])
    full, full_losses = _sft(tiny_dir, data, tmp_path / "fp32", "float32")
    half, half_losses = _sft(tiny_dir, data, tmp_path / "bf16", "bfloat16")
    assert half["done"] and len(half_losses) == len(full_losses) == 6
    assert abs(half_losses[0] - full_losses[0]) <= STEP1_TOLERANCE * full_losses[0], (half_losses, full_losses)
    for a, b in zip(half_losses, full_losses):
        assert abs(a - b) <= STEP_TOLERANCE * b, (half_losses, full_losses)
    full_drop, half_drop = full["first_val_loss"] - full["val_loss"], half["first_val_loss"] - half["val_loss"]
    assert full_drop > 0.5 and half_drop >= 0.75 * full_drop, (full_drop, half_drop)
    # the engine trains bf16 weights; DeepSpeed's optimizer wrapper keeps fp32 master weights and AdamW state
    engine = half["engine"]
    assert {p.dtype for p in engine.module.parameters()} == {torch.bfloat16}
    masters = [p for group in engine.basic_optimizer.param_groups for p in group["params"]]
    assert masters and {p.dtype for p in masters} == {torch.float32}
    assert {s["exp_avg"].dtype for s in engine.basic_optimizer.state.values()} == {torch.float32}
    module_bytes = [
        sum(p.numel() * p.element_size() for p in out["engine"].module.parameters()) for out in (full, half)
    ]
    assert module_bytes[1] * 2 == module_bytes[0]
    # the exports are written in model.dtype and say so
    assert safetensors_dtypes(tmp_path / "fp32" / "hf") == {"F32"}
    assert safetensors_dtypes(tmp_path / "bf16" / "hf") == {"BF16"}
    assert read_json(tmp_path / "bf16" / "hf" / "bat_export.json")["dtype"] == "bfloat16"
    assert read_json(tmp_path / "bf16" / "hf" / "config.json")["dtype"] == "bfloat16"
    sizes = [(tmp_path / run / "hf" / "model.safetensors").stat().st_size for run in ("fp32", "bf16")]
    assert sizes[1] < 0.55 * sizes[0], sizes
    exported = load_model(tmp_path / "bf16" / "hf", dtype="bfloat16").state_dict()
    trained = engine.module.state_dict()
    assert all(torch.equal(exported[k], trained[k].cpu()) for k in exported)


def test_a_step_checkpoint_resumes_only_in_its_own_dtype(tiny_dir, sft_rows, tmp_path):
    data = prepare_sft(sft_rows(16, 1), [], load_tokenizer(tiny_dir), 256, tools=[])
    cfg = SftConfig(
        steps=4, lr=3e-3, global_batch=8, checkpoint_every=2, deepspeed=DeepSpeedConfig(micro_batch_per_rank=8)
    )
    paths = dict(ckpt_root=tmp_path / "ck", export_dir=tmp_path / "hf", metrics_path=tmp_path / "m.jsonl")
    train_sft(tiny_dir, data, cfg, seed=3, stop_after=2, dtype="float32", **paths)
    with pytest.raises(ValueError, match="trained with model.dtype=float32, this run has model.dtype=bfloat16; valid"):
        train_sft(tiny_dir, data, cfg, seed=3, dtype="bfloat16", **paths)
    assert train_sft(tiny_dir, data, cfg, seed=3, dtype="float32", **paths)["done"]


def test_grpo_loads_policy_and_kl_reference_in_model_dtype(tiny_dir, grpo_records, tmp_path, monkeypatch):
    import bat.policy.loader as loader

    loaded = []
    real = loader.load_model

    def spy(*args, **kwargs):
        model = real(*args, **kwargs)
        loaded.append((kwargs.get("dtype"), next(model.parameters()).dtype))
        return model

    monkeypatch.setattr(loader, "load_model", spy)
    rollouts, rewards = grpo_records
    data = build_items(rollouts, rewards, max_seq_len=4096, normalize_std=True, adv_eps=1e-6)
    cfg = GrpoConfig(
        steps=2,
        lr=2e-3,
        step_batches="shuffle",
        minibatch=8,
        kl_coef=0.05,
        kl_reference="checkpoint",
        checkpoint_every=100,
        keep_checkpoints=1,
        deepspeed=DeepSpeedConfig(micro_batch_per_rank=4),
    )
    out = train_grpo(
        tiny_dir,
        data,
        cfg,
        seed=3,
        ckpt_root=tmp_path / "ck",
        export_dir=tmp_path / "hf",
        metrics_path=tmp_path / "m.jsonl",
        dtype="bfloat16",
    )
    assert out["done"] and math.isfinite(out["last"]["kl"]) and out["last"]["kl"] > 0
    assert loaded == [("bfloat16", torch.bfloat16), ("bfloat16", torch.bfloat16)]  # the policy, then the reference
    assert safetensors_dtypes(tmp_path / "hf") == {"BF16"}
    meta = read_json(tmp_path / "hf" / "bat_export.json")
    assert (meta["kind"], meta["dtype"]) == ("grpo", "bfloat16")


_KL_PEAK = """
import json, sys
import torch, transformers
from bat.train.kl_estimate import estimate_kl

def peak_kib():  # VmHWM: peak RSS of this process's own memory (ru_maxrss would carry the parent's over exec)
    return int(next(line for line in open("/proc/self/status") if line.startswith("VmHWM:")).split()[1])

before = peak_kib()
prompts = [[{"role": "user", "content": "List the folder `task`."}], [{"role": "user", "content": "Read notes.txt."}]]
kl = estimate_kl(sys.argv[1], sys.argv[1], prompts, max_new_tokens=4, tools=[], dtype=sys.argv[2])
print(json.dumps({"kl": kl, "peak_mib": (peak_kib() - before) / 1024}))
"""


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads VmHWM from /proc/self/status")
def test_the_route_kl_check_in_bf16_takes_less_peak_memory(smollm2_dir, tmp_path):
    """The route's KL check loads two copies of a checkpoint exported in bf16; loaded in model.dtype bfloat16 its
    peak RSS is lower than in float32 (measured on SmolLM2-135M: ~0.7 GiB against ~1.4 GiB above the imports)."""
    folder = tmp_path / "bf16"
    load_model(smollm2_dir, dtype="bfloat16").save_pretrained(folder)
    load_tokenizer(smollm2_dir).save_pretrained(folder)
    peaks = {}
    for dtype in ("float32", "bfloat16"):
        run = subprocess.run(
            [sys.executable, "-c", _KL_PEAK, str(folder), dtype], capture_output=True, text=True, check=True
        )
        result = json.loads(run.stdout.strip().splitlines()[-1])
        assert result["kl"] == 0.0
        peaks[dtype] = result["peak_mib"]
    assert peaks["bfloat16"] < peaks["float32"] - 300, peaks
