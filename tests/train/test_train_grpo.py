"""GRPO block: joins rollouts with rewards, improves rewarded responses, resumes exactly, masks correctly."""

from __future__ import annotations

import pytest
import torch

from bat.config.deepspeed import DeepSpeedConfig
from bat.config.grpo import GrpoConfig
from bat.policy.loader import load_model
from bat.state.checkpoints import CheckpointStore
from bat.state.jsonl import read_jsonl
from bat.train.grpo import plan_batch_of_step, plan_step_batches, sequence_logprobs, train_grpo
from bat.train.grpo_data import build_items, collate_items
from bat.train.losses import aggregate, grpo_token_loss


def _items(records, **kw):
    rollouts, rewards = records
    return build_items(rollouts, rewards, max_seq_len=kw.get("max_seq_len", 4096), normalize_std=True, adv_eps=1e-6)


def _cfg(steps, **kw):
    base = dict(
        steps=steps,
        lr=2e-3,
        step_batches="shuffle",
        minibatch=8,
        kl_coef=1e-3,
        checkpoint_every=100,
        keep_checkpoints=2,
        deepspeed=DeepSpeedConfig(micro_batch_per_rank=4),
    )
    return GrpoConfig(**(base | kw))


def test_items_join_rewards_and_exclude_invalid(grpo_records):
    data = _items(grpo_records)
    c = data.counts
    assert c["rollouts"] == 24 and c["rewards"] == 24
    assert c["excluded_invalid_rollout"] == 1 and c["excluded_invalid_reward"] == 1
    assert c["groups"] == 6 and c["groups_identical_rewards"] == 2 and c["trainable"] == 22
    adv = {i.rollout_id: i.adv for i in data.items}
    assert adv["s0-k0"] == pytest.approx(1.0, abs=1e-4) and adv["s0-k3"] == pytest.approx(-1.0, abs=1e-4)
    assert all(adv[f"s4-k{k}"] == 0.0 for k in range(4))
    # state 5: k2, k3 valid with reward 0 each -> identical -> zero advantage
    assert adv["s5-k2"] == 0.0 and "s5-k0" not in adv and "s5-k1" not in adv
    short = _items(grpo_records, max_seq_len=10)
    assert short.counts["excluded_overlong"] == 22 and short.items == []


def _mean_logprob(model, items):
    batch = collate_items(items, 0)
    with torch.no_grad():
        logp = sequence_logprobs(model, batch, "cpu")
    return float(aggregate(logp, batch["loss_mask"], "token-mean"))


def test_grpo_raises_rewarded_responses(tiny_dir, grpo_records, tmp_path):
    data = _items(grpo_records)
    out = train_grpo(
        tiny_dir,
        data,
        _cfg(6),
        seed=5,
        ckpt_root=tmp_path / "ck",
        export_dir=tmp_path / "hf",
        metrics_path=tmp_path / "m.jsonl",
    )
    assert out["done"] and (tmp_path / "hf" / "model.safetensors").exists()
    good = [i for i in data.items if i.adv > 0]
    bad = [i for i in data.items if i.adv < 0]
    before, after = load_model(tiny_dir), load_model(tmp_path / "hf")
    assert _mean_logprob(after, good) > _mean_logprob(before, good) + 0.1
    assert _mean_logprob(after, bad) < _mean_logprob(before, bad)
    metrics = read_jsonl(tmp_path / "m.jsonl")
    assert [m["step"] for m in metrics] == [1, 2, 3, 4, 5, 6]
    for m in metrics:
        assert m["kl"] >= 0.0 and 0.0 <= m["clip_frac"] <= 1.0 and m["grad_norm"] > 0
        assert m["rollouts"] == 8 and m["generated_tokens"] > 0 and m["tokens"] > m["generated_tokens"]
        assert set(m["reward_mean_by_pool"]) <= {"E2E", "S-target"}
        assert 0.0 <= m["adv_uncancelled"] <= 1.0
    assert metrics[0]["kl"] == pytest.approx(0.0, abs=1e-6)  # first step: policy == reference
    assert any(m["clip_frac"] > 0 for m in metrics)


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_grpo_resume_equals_uninterrupted(tiny_dir, grpo_records, tmp_path, agg):
    data = _items(grpo_records)
    cfg = _cfg(4, checkpoint_every=2, loss_agg=agg, kl_estimator="k2", kl_coef=0.01)
    train_grpo(
        tiny_dir,
        data,
        cfg,
        seed=9,
        ckpt_root=tmp_path / "a",
        export_dir=tmp_path / "a_hf",
        metrics_path=tmp_path / "a.jsonl",
    )
    part = train_grpo(
        tiny_dir,
        data,
        cfg,
        seed=9,
        ckpt_root=tmp_path / "b",
        export_dir=tmp_path / "b_hf",
        metrics_path=tmp_path / "b.jsonl",
        stop_after=2,
    )
    assert not part["done"] and CheckpointStore(tmp_path / "b").valid_steps() == [2]
    train_grpo(
        tiny_dir,
        data,
        cfg,
        seed=9,
        ckpt_root=tmp_path / "b",
        export_dir=tmp_path / "b_hf",
        metrics_path=tmp_path / "b.jsonl",
    )
    a, b = load_model(tmp_path / "a_hf").state_dict(), load_model(tmp_path / "b_hf").state_dict()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-5, atol=1e-6, msg=name)
    la = [m["loss"] for m in read_jsonl(tmp_path / "a.jsonl")]
    lb = [m["loss"] for m in read_jsonl(tmp_path / "b.jsonl")]
    assert la == pytest.approx(lb, rel=1e-5) and len(lb) == 4


def _loss_and_grads(model, items, **kw):
    model.zero_grad()
    batch = collate_items(items, 0)
    logp = sequence_logprobs(model, batch, "cpu")
    with torch.no_grad():
        ref = logp.detach() + kw.pop("ref_shift", 0.0)
    per_token, _ = grpo_token_loss(
        logp,
        kw.pop("behavior", batch["behavior_logprobs"]),
        ref,
        batch["adv"],
        batch["loss_mask"],
        clip_eps=0.2,
        kl_coef=kw.pop("kl_coef", 0.0),
    )
    loss = aggregate(per_token, batch["loss_mask"], "token-mean")
    loss.backward()
    return loss, [p.grad for p in model.parameters()]


def test_identical_reward_group_gives_zero_policy_gradient(tiny_dir, grpo_records):
    data = _items(grpo_records)
    group = [i for i in data.items if i.state_id == "state4"]
    assert len(group) == 4 and all(i.adv == 0.0 for i in group)
    model = load_model(tiny_dir).train()
    loss, grads = _loss_and_grads(model, group)
    assert loss.item() == 0.0
    assert all(g is None or torch.count_nonzero(g) == 0 for g in grads)
    loss, grads = _loss_and_grads(model, [i for i in data.items if i.state_id == "state0"])
    assert any(g is not None and torch.count_nonzero(g) > 0 for g in grads)


def test_observation_tokens_do_not_affect_the_loss(tiny_dir, grpo_records):
    data = _items(grpo_records)
    items = [i for i in data.items if i.state_id == "state0"]
    model = load_model(tiny_dir).train()
    batch = collate_items(items, 0)
    loss_a, grads_a = _loss_and_grads(model, items, kl_coef=0.1)
    scrambled = torch.where(
        batch["loss_mask"].bool(), batch["behavior_logprobs"], torch.full_like(batch["behavior_logprobs"], -50.0)
    )
    loss_b, grads_b = _loss_and_grads(model, items, kl_coef=0.1, behavior=scrambled)
    assert loss_a.item() == loss_b.item()
    assert all(torch.equal(a, b) for a, b in zip(grads_a, grads_b) if a is not None)


class _PlainEngine:
    """The slice of a DeepSpeed engine `micro_step` uses, over a plain HF model (gradients stay inspectable)."""

    def __init__(self, model):
        self.module, self.device = model, "cpu"

    def __call__(self, **kw):
        return self.module(**kw)

    def backward(self, loss):
        loss.backward()


def test_first_step_shortcuts_are_exact(tiny_dir, grpo_records):
    from bat.train.grpo import micro_step

    data = _items(grpo_records)
    cfg = _cfg(2, kl_coef=0.05, kl_reference="checkpoint")
    mixed = collate_items([i for i in data.items if i.state_id == "state0"], 0)
    grads = []
    for at_reference in (False, True):
        model = load_model(tiny_dir).train()
        ref = None if at_reference else load_model(tiny_dir).requires_grad_(False)
        out = micro_step(_PlainEngine(model), ref, mixed, cfg, 0.01, at_reference=at_reference)
        assert out[4] == 0.0
        grads.append([p.grad.clone() for p in model.parameters()])
    assert all(torch.allclose(a, b, atol=1e-7) for a, b in zip(*grads))  # detached own log-probs == the reference's
    zero = collate_items([i for i in data.items if i.state_id == "state4"], 0)
    model = load_model(tiny_dir).train()
    out = micro_step(_PlainEngine(model), None, zero, cfg, 0.01, at_reference=True)
    assert out[4] == 1.0 and out[0] == 0.0 and out[3] > 0
    assert all(p.grad is None or torch.count_nonzero(p.grad) == 0 for p in model.parameters())
    model = load_model(tiny_dir).train()  # after the first step the KL term needs the reference: not skipped
    ref = load_model(tiny_dir).requires_grad_(False)
    assert micro_step(_PlainEngine(model), ref, zero, cfg, 0.01, at_reference=False)[4] == 0.0


def test_behavior_logprobs_stand_in_for_the_reference_forward(tiny_dir, grpo_records):
    """After the policy moved, the KL term against the rollouts' behavior log-probs (sampled from the start
    checkpoint) gives the gradients of a forward through the frozen start checkpoint, without that forward."""
    from bat.train.grpo import micro_step

    data = _items(grpo_records)
    batch = collate_items([i for i in data.items if i.state_id in ("state0", "state4")], 0)
    grads, kls = [], []
    for reference in ("checkpoint", "behavior"):
        model = load_model(tiny_dir).train()
        with torch.no_grad():
            for p in model.parameters():  # a policy some steps away from the start checkpoint
                p.add_(torch.randn_like(p, generator=torch.Generator().manual_seed(p.numel())) * 1e-2)
        ref = load_model(tiny_dir).requires_grad_(False) if reference == "checkpoint" else None
        cfg = _cfg(2, kl_coef=0.5, kl_reference=reference)
        out = micro_step(_PlainEngine(model), ref, batch, cfg, 0.01, at_reference=False)
        kls.append(out[1])
        grads.append([p.grad.clone() for p in model.parameters()])
    assert kls[0] > 1e-4 and kls[1] == pytest.approx(kls[0], rel=1e-3)
    assert all(torch.allclose(a, b, atol=1e-6, rtol=1e-4) for a, b in zip(*grads))


def test_behavior_reference_block_never_loads_a_reference_model(tiny_dir, grpo_records, tmp_path, monkeypatch):
    import bat.policy.loader as loader

    loads = []
    real = loader.load_model
    monkeypatch.setattr(loader, "load_model", lambda *a, **kw: loads.append(a) or real(*a, **kw))
    data = _items(grpo_records)
    for reference in ("behavior", "checkpoint"):
        loads.clear()
        out = train_grpo(
            tiny_dir,
            data,
            _cfg(2, kl_coef=0.05, kl_reference=reference),
            seed=3,
            ckpt_root=tmp_path / reference / "ck",
            export_dir=tmp_path / reference / "hf",
            metrics_path=tmp_path / reference / "m.jsonl",
        )
        assert out["done"] and out["last"]["kl"] > 0
        assert len(loads) == (1 if reference == "behavior" else 2), reference  # the policy (+ the reference)


def test_zero_advantage_block_is_skipped_and_leaves_weights(tiny_dir, grpo_records, tmp_path):
    data = _items(grpo_records)
    zero = type(data)(items=[i for i in data.items if i.adv == 0.0])
    assert zero.items
    out = train_grpo(
        tiny_dir,
        zero,
        _cfg(1, minibatch=len(zero.items), deepspeed=DeepSpeedConfig(micro_batch_per_rank=1)),
        seed=1,
        ckpt_root=tmp_path / "ck",
        export_dir=tmp_path / "hf",
        metrics_path=tmp_path / "m.jsonl",
    )
    assert out["done"]
    (record,) = read_jsonl(tmp_path / "m.jsonl")
    assert record["zero_advantage_microbatches_skipped"] == len(zero.items)
    assert record["tokens_per_s"] == 0.0 and record["tokens"] > 0  # nothing was forwarded
    a, b = load_model(tiny_dir).state_dict(), load_model(tmp_path / "hf").state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


PLAN = [["state0", "state1", "state2"], ["state3", "state4"], ["state5", "state0"]]
"""Three plan batches over the fixture's states (state0 listed twice, as a cycled pool lists a row again)."""


def test_plan_steps_train_whole_groups_with_the_batch_mix(tiny_dir, grpo_records, tmp_path):
    data = _items(grpo_records)
    steps = plan_step_batches(data.items, PLAN)
    groups = [{data.items[i].state_id for i in step} for step in steps]
    assert groups == [{"state0", "state1", "state2"}, {"state3", "state4"}, {"state5", "state0"}]
    for step in steps:  # every trainable rollout of a listed state is in the step: no group is split
        listed = {data.items[i].state_id for i in step}
        assert sorted(step) == sorted(i for i, item in enumerate(data.items) if item.state_id in listed)
    assert sorted(plan_batch_of_step(s, 3, 7) for s in range(3)) == [0, 1, 2]  # each pass visits every batch once
    assert sorted(plan_batch_of_step(s, 3, 7) for s in range(3, 6)) == [0, 1, 2]

    out = train_grpo(
        tiny_dir,
        data,
        _cfg(6, step_batches="plan", deepspeed=DeepSpeedConfig(micro_batch_per_rank=2)),
        seed=7,
        ckpt_root=tmp_path / "ck",
        export_dir=tmp_path / "hf",
        metrics_path=tmp_path / "m.jsonl",
        batches=PLAN,
    )
    assert out["done"]
    metrics = read_jsonl(tmp_path / "m.jsonl")
    by_pool = {"state0": "S-target", "state1": "E2E", "state2": "S-target", "state3": "E2E", "state4": "S-target"}
    by_pool["state5"] = "E2E"
    sizes = [len(step) for step in steps]  # 12, 8, 6 trainable rollouts (state5 has 2 valid ones)
    assert sizes == [12, 8, 6]
    seen = []
    for m in metrics:
        b = plan_batch_of_step(m["step"] - 1, 3, 7)
        seen.append(b)
        expected_pools: dict[str, int] = {}
        for i in steps[b]:
            expected_pools[by_pool[data.items[i].state_id]] = expected_pools.get(by_pool[data.items[i].state_id], 0) + 1
        assert m["rollouts"] == sizes[b] and m["groups"] == len(groups[b])
        assert m["rollouts_by_pool"] == dict(sorted(expected_pools.items()))
        assert m["padding_microbatches"] == 6 - sizes[b] // 2  # accumulation runs to the largest batch (12 / 2)
    assert sorted(seen) == [0, 0, 1, 1, 2, 2]


def _run(tiny_dir, data, cfg, out, **kw):
    """train_grpo writing under `out` (checkpoints, export, metrics)."""
    return train_grpo(
        tiny_dir, data, cfg, ckpt_root=out / "ck", export_dir=out / "hf", metrics_path=out / "m.jsonl", **kw
    )


def test_plan_steps_resume_exactly_and_need_the_plan(tiny_dir, grpo_records, tmp_path):
    data = _items(grpo_records)
    cfg = _cfg(3, step_batches="plan", checkpoint_every=1, deepspeed=DeepSpeedConfig(micro_batch_per_rank=4))
    _run(tiny_dir, data, cfg, tmp_path / "a", seed=3, batches=PLAN)
    assert not _run(tiny_dir, data, cfg, tmp_path / "b", seed=3, batches=PLAN, stop_after=1)["done"]
    _run(tiny_dir, data, cfg, tmp_path / "b", seed=3, batches=PLAN)
    a, b = load_model(tmp_path / "a" / "hf").state_dict(), load_model(tmp_path / "b" / "hf").state_dict()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-5, atol=1e-6, msg=name)
    with pytest.raises(ValueError, match="needs the round plan's batches; valid without one: 'shuffle'"):
        _run(tiny_dir, data, cfg, tmp_path / "c", seed=3)


def test_an_sgd_step_scales_with_the_gradient_where_adamw_takes_a_sign_step(tiny_dir, grpo_records, tmp_path):
    """One step from a fresh optimizer: AdamW moves most weights by exactly lr (lr x sign(g)); SGD moves them by
    lr x the clipped gradient, so its step's L2 norm is lr x min(grad norm, clip) and linear in lr."""
    from bat.train.step_stats import step_stats

    data = _items(grpo_records)

    def one_step(optimizer, lr, name):
        out = tmp_path / name
        cfg = _cfg(1, lr=lr, optimizer=optimizer)
        train_grpo(
            tiny_dir, data, cfg, seed=5, ckpt_root=out / "ck", export_dir=out / "hf", metrics_path=out / "m.jsonl"
        )
        return step_stats(tiny_dir, out / "hf", lr=lr), read_jsonl(out / "m.jsonl")[0]

    adamw, _ = one_step("adamw", 1e-3, "adamw")
    sgd, metrics = one_step("sgd", 1e-3, "sgd")
    sgd_twice, _ = one_step("sgd", 2e-3, "sgd2")
    assert adamw["at_lr_fraction"] > 0.5 and sgd["at_lr_fraction"] < 0.05
    assert sgd["step_l2"] == pytest.approx(1e-3 * min(metrics["grad_norm"], 1.0), rel=1e-2)
    assert sgd_twice["step_l2"] == pytest.approx(2 * sgd["step_l2"], rel=1e-3) and sgd["step_l2"] < adamw["step_l2"]


def test_a_carried_optimizer_state_continues_the_previous_blocks_moments(tiny_dir, grpo_records, tmp_path):
    """`carry_from`: the next block's first AdamW step uses the previous block's moments, so it moves the weights
    differently from a fresh optimizer's first step (|update| = lr x sign(g) for every weight)."""
    from bat.state.digest import sha256_path

    data = _items(grpo_records)
    first = train_grpo(tiny_dir, data, _cfg(2), seed=5, ckpt_root=tmp_path / "ck1", export_dir=tmp_path / "hf1",
                       metrics_path=tmp_path / "m1.jsonl")  # fmt: skip
    assert first["done"]
    outs = {}
    for name, carry in (("fresh", None), ("carried", tmp_path / "ck1")):
        train_grpo(tmp_path / "hf1", data, _cfg(1), seed=6, ckpt_root=tmp_path / f"ck-{name}",
                   export_dir=tmp_path / name, metrics_path=tmp_path / f"m-{name}.jsonl", carry_from=carry)  # fmt: skip
        outs[name] = sha256_path(tmp_path / name / "model.safetensors")
    assert outs["fresh"] != outs["carried"]
