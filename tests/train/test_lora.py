"""LoRA adapters (peft) for SFT and GRPO: adapters learn, step checkpoints hold only them, resume is exact, the merged
export computes what the adapted model computes, GRPO's adapters-off KL reference is the start checkpoint."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from bat.config.deepspeed import DeepSpeedConfig
from bat.config.grpo import GrpoConfig
from bat.config.lora import LLAMA_PROJECTIONS, LoraConfig
from bat.config.sft import SftConfig
from bat.policy.loader import load_model, load_tokenizer
from bat.state.checkpoints import CheckpointStore, adapter_dir
from bat.state.jsonl import read_jsonl
from bat.train.grpo import train_grpo
from bat.train.grpo_data import build_items
from bat.train.lora import BASE_KEY, AdapterBase, AdaptersOff, check_resume, is_adapted, wrap_lora
from bat.train.sft import train_sft
from bat.train.sft_data import prepare_sft

LORA = LoraConfig(enabled=True, r=4, alpha=8.0)


def _sft_cfg(steps: int, lora: LoraConfig = LORA, **kw) -> SftConfig:
    base = dict(
        steps=steps,
        lr=2e-2,
        warmup_ratio=0.0,
        global_batch=8,
        val_every=1000,
        checkpoint_every=1000,
        keep_checkpoints=2,
        deepspeed=DeepSpeedConfig(micro_batch_per_rank=8),
        lora=lora,
    )
    return SftConfig(**(base | kw))


def _sft(model_dir, data, cfg, out: Path, **kw):
    return train_sft(
        model_dir,
        data,
        cfg,
        seed=3,
        ckpt_root=out / "ck",
        export_dir=out / "hf",
        metrics_path=out / "metrics.jsonl",
        **kw,
    )


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _logits(model, ids) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits


@pytest.fixture(scope="module")
def sft_data(tiny_dir, sft_rows):
    return prepare_sft(sft_rows(16, 1), [], load_tokenizer(tiny_dir), 256, tools=[])


@pytest.fixture(scope="module")
def lora_sft(tiny_dir, sft_data, tmp_path_factory):
    """A finished 6-step LoRA SFT run: (summary, output folder)."""
    out = tmp_path_factory.mktemp("lora_sft")
    return _sft(tiny_dir, sft_data, _sft_cfg(6), out), out


def test_sft_with_lora_learns_and_checkpoints_only_adapters(tiny_dir, sft_data, lora_sft, tmp_path):
    summary, out = lora_sft
    assert summary["done"] and is_adapted(summary["engine"].module)
    losses = [m["loss"] for m in read_jsonl(out / "metrics.jsonl") if "loss" in m]
    assert len(losses) == 6 and all(m["grad_norm"] > 0 for m in read_jsonl(out / "metrics.jsonl"))
    assert losses[-1] < losses[0] - 0.3, losses
    # the same step with every weight trained: the adapter checkpoint is a small fraction of it
    full = _sft(tiny_dir, sft_data, _sft_cfg(6, LoraConfig()), tmp_path / "full")
    assert full["done"] and not is_adapted(full["engine"].module)
    lora_step, full_step = CheckpointStore(out / "ck").path(6), CheckpointStore(tmp_path / "full" / "ck").path(6)
    assert _dir_bytes(lora_step) * 5 < _dir_bytes(full_step), (_dir_bytes(lora_step), _dir_bytes(full_step))
    meta = CheckpointStore(out / "ck").meta(6)
    assert meta[BASE_KEY] == {"path": str(tiny_dir), "digest": AdapterBase.of(tiny_dir).digest}
    # the export is a full model: adapted projections moved, everything else is the base, bit for bit
    base, merged = load_model(tiny_dir).state_dict(), load_model(out / "hf").state_dict()
    assert merged.keys() == base.keys()
    adapted = [k for k in base if k.rsplit(".", 2)[-2] in LLAMA_PROJECTIONS]
    assert adapted and all(not torch.equal(merged[k], base[k]) for k in adapted)
    assert all(torch.equal(merged[k], base[k]) for k in base if k not in adapted)
    # the adapter folder holds the adapter and its settings, and nothing that names this machine's paths
    adapter = adapter_dir(out / "hf")
    assert sorted(p.name for p in adapter.iterdir()) == ["adapter_config.json", "adapter_model.safetensors"]
    assert str(tiny_dir) not in (adapter / "adapter_config.json").read_text()


def test_lora_resume_equals_uninterrupted(tiny_dir, sft_data, tmp_path):
    cfg = _sft_cfg(4, checkpoint_every=2)
    _sft(tiny_dir, sft_data, cfg, tmp_path / "a")
    first = _sft(tiny_dir, sft_data, cfg, tmp_path / "b", stop_after=2)
    assert not first["done"] and CheckpointStore(tmp_path / "b" / "ck").valid_steps() == [2]
    second = _sft(tiny_dir, sft_data, cfg, tmp_path / "b")
    assert second["done"] and second["step"] == 4
    a = load_file(adapter_dir(tmp_path / "a" / "hf") / "adapter_model.safetensors")
    b = load_file(adapter_dir(tmp_path / "b" / "hf") / "adapter_model.safetensors")
    assert a.keys() == b.keys() and len(a) == 2 * 2 * len(LLAMA_PROJECTIONS)  # A and B x 2 layers x 7 projections
    for name in a:
        assert torch.equal(b[name], a[name]), name
    losses = [[m["loss"] for m in read_jsonl(tmp_path / run / "metrics.jsonl")] for run in ("a", "b")]
    assert losses[1] == losses[0]


def test_merged_export_computes_the_adapted_model(tiny_dir, lora_sft):
    from peft import PeftModel

    summary, out = lora_sft
    ids = torch.tensor([list(range(3, 40))])
    adapted = PeftModel.from_pretrained(load_model(tiny_dir), adapter_dir(out / "hf")).eval()
    merged = load_model(out / "hf")
    trained = summary["engine"].module.eval()
    torch.testing.assert_close(_logits(merged, ids), _logits(adapted, ids), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(_logits(trained, ids), _logits(adapted, ids), rtol=0, atol=0)
    assert (_logits(merged, ids) - _logits(load_model(tiny_dir), ids)).abs().max() > 1e-2  # the adapter matters


def test_the_merged_export_rebuilt_from_the_base_and_the_adapter_is_the_trained_export(tiny_dir, lora_sft, tmp_path):
    from bat.state.digest import sha256_path
    from bat.train.lora import write_merged_export

    _summary, out = lora_sft
    rebuilt = write_merged_export(tiny_dir, adapter_dir(out / "hf"), tmp_path / "rebuilt", dtype="float32", meta={})
    weights = "model.safetensors"
    assert sha256_path(rebuilt / weights) == sha256_path(out / "hf" / weights)  # bit for bit, from files alone
    assert sha256_path(adapter_dir(rebuilt)) == sha256_path(adapter_dir(out / "hf"))
    assert (rebuilt / "tokenizer.json").is_file() or (rebuilt / "tokenizer_config.json").is_file()
    before = (rebuilt / weights).stat().st_mtime_ns
    write_merged_export(tiny_dir, adapter_dir(out / "hf"), tmp_path / "rebuilt", dtype="float32", meta={})
    assert (rebuilt / weights).stat().st_mtime_ns == before  # an existing export is kept


def test_grpo_with_lora_trains_exports_and_keeps_the_start_as_reference(tiny_dir, grpo_records, tmp_path):
    rollouts, rewards = grpo_records
    data = build_items(rollouts, rewards, max_seq_len=4096, normalize_std=True, adv_eps=1e-6)
    cfg = GrpoConfig(
        steps=2,
        lr=2e-2,
        step_batches="shuffle",
        minibatch=8,
        kl_coef=1e-2,
        kl_reference="checkpoint",
        checkpoint_every=100,
        deepspeed=DeepSpeedConfig(micro_batch_per_rank=4),
        lora=LORA,
    )
    out = train_grpo(
        tiny_dir,
        data,
        cfg,
        seed=5,
        ckpt_root=tmp_path / "ck",
        export_dir=tmp_path / "hf",
        metrics_path=tmp_path / "m.jsonl",
    )
    assert out["done"] and (tmp_path / "hf" / "model.safetensors").is_file()
    assert (adapter_dir(tmp_path / "hf") / "adapter_model.safetensors").is_file()
    metrics = read_jsonl(tmp_path / "m.jsonl")
    assert [m["step"] for m in metrics] == [1, 2]
    assert metrics[0]["kl"] == 0.0  # step 1: the policy is the reference
    assert math.isfinite(metrics[1]["kl"]) and metrics[1]["kl"] > 0.0  # step 2: adapters-off reference, moved policy
    assert CheckpointStore(tmp_path / "ck").meta(2)[BASE_KEY]["path"] == str(tiny_dir)
    ids = torch.tensor([rollouts[0].token_ids[:40]])
    engine_model = out["engine"].module.eval()
    torch.testing.assert_close(_logits(AdaptersOff(engine_model), ids), _logits(load_model(tiny_dir), ids))
    merged = _logits(load_model(tmp_path / "hf"), ids)
    torch.testing.assert_close(merged, _logits(engine_model, ids), rtol=1e-5, atol=1e-5)
    assert (merged - _logits(load_model(tiny_dir), ids)).abs().max() > 1e-3


def test_resume_refuses_another_base_or_a_lora_switch(tmp_path):
    where = tmp_path / "ck" / "step_000002"
    base = AdapterBase("/models/start", "a" * 64)
    check_resume(base.meta(), where, base=base)
    check_resume({}, where, base=None)
    with pytest.raises(ValueError, match="trained on /models/start .* has digest bbbb"):
        check_resume(base.meta(), where, base=AdapterBase("/models/other", "b" * 64))
    with pytest.raises(ValueError, match="holds LoRA adapters only; set lora.enabled=true"):
        check_resume(base.meta(), where, base=None)
    with pytest.raises(ValueError, match="holds a full model, not LoRA adapters; set lora.enabled=false"):
        check_resume({}, where, base=base)


def test_lora_settings_are_checked(tiny_dir):
    model = load_model(tiny_dir)
    assert wrap_lora(model, LoraConfig()) is model
    with pytest.raises(ValueError, match=r"\['qkv'\] are not linear layers .* valid names: \[.*'q_proj'"):
        wrap_lora(model, LoraConfig(enabled=True, target_modules=("q_proj", "qkv")))
    with pytest.raises(ValueError, match=r"must be distinct.*repeated: \['q_proj'\]"):
        LoraConfig(target_modules=("q_proj", "q_proj"))
    wrapped = wrap_lora(model, LORA)
    trainable = [n for n, p in wrapped.named_parameters() if p.requires_grad]
    assert trainable and all(".lora_A." in n or ".lora_B." in n for n in trainable)
