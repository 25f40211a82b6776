"""Hand-computed checks of the GRPO terms (Eqs. 4, 17-19) and their masking."""

from __future__ import annotations

import math

import pytest
import torch

from bat.train.losses import aggregate, clipped_objective, group_advantages, grpo_loss, kl_penalty


def test_advantages_within_state_groups_only():
    rewards = torch.tensor([1.0, 0.0, 0.5, 0.2, 0.2, 1.0, 0.0, 0.0])
    groups = ["a", "a", "a", "b", "b", "c", "c", "c"]
    valid = torch.tensor([True, True, True, True, True, True, False, True])
    adv = group_advantages(rewards, groups, valid, normalize_std=True, eps=0.0)
    s = math.sqrt(1 / 6)  # population std of (1, 0, 0.5)
    expected = [0.5 / s, -0.5 / s, 0.0, 0.0, 0.0, 1.0, 0.0, -1.0]  # c: mean .5, std .5 over valid members
    assert adv.tolist() == pytest.approx(expected, abs=1e-6)


def test_advantages_without_std_normalisation():
    adv = group_advantages(torch.tensor([1.0, 0.0, 0.5, 3.0]), ["a", "a", "a", "b"], normalize_std=False)
    assert adv.tolist() == pytest.approx([0.5, -0.5, 0.0, 0.0])


def test_advantages_reject_misaligned_inputs():
    with pytest.raises(ValueError, match="one entry per rollout"):
        group_advantages(torch.tensor([1.0, 0.0]), ["a"])


def test_kl_estimators_by_hand():
    logp, ref = torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)])
    x = math.log(0.25) - math.log(0.5)
    assert kl_penalty(logp, ref, "k1").item() == pytest.approx(-x)  # 0.693147
    assert kl_penalty(logp, ref, "k2").item() == pytest.approx(0.5 * x * x)  # 0.240227
    assert kl_penalty(logp, ref, "k3").item() == pytest.approx(0.5 - 1 - x)  # 0.193147
    assert kl_penalty(ref, ref, "k3").item() == 0.0
    with pytest.raises(ValueError, match=r"valid estimators: \['k1', 'k2', 'k3'\]"):
        kl_penalty(logp, ref, "k4")


def test_clipped_objective_by_hand():
    behavior = torch.full((5,), math.log(0.5))
    logp = torch.log(torch.tensor([0.7, 0.7, 0.3, 0.3, 0.55]))  # ratios 1.4, 1.4, 0.6, 0.6, 1.1
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0, 2.0])
    g, clipped = clipped_objective(logp, behavior, adv, clip_eps=0.2)
    assert g.tolist() == pytest.approx([1.2, -1.4, 0.6, -0.8, 2.2], abs=1e-6)
    assert clipped.tolist() == [True, False, False, True, False]


def test_aggregation_modes_by_hand():
    values = torch.tensor([[1.0, 2.0, 3.0, 9.0], [4.0, 9.0, 9.0, 9.0], [9.0, 9.0, 9.0, 9.0]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]])
    assert aggregate(values, mask, "token-mean").item() == pytest.approx(10 / 4)
    assert aggregate(values, mask, "seq-mean-token-mean").item() == pytest.approx((2 + 4) / 2)
    with pytest.raises(ValueError, match="valid modes"):
        aggregate(values, mask, "sum")


def test_grpo_loss_combines_terms_by_hand():
    behavior = torch.log(torch.tensor([[0.5, 0.5, 0.5]]))
    logp = torch.log(torch.tensor([[0.7, 0.3, 0.5]]))
    ref = torch.log(torch.tensor([[0.5, 0.5, 0.5]]))
    mask = torch.tensor([[1, 1, 0]])
    loss, stats = grpo_loss(logp, behavior, ref, torch.tensor([1.0]), mask, clip_eps=0.2, kl_coef=0.1, kl_kind="k3")
    k3 = [5 / 7 - 1 - math.log(5 / 7), 5 / 3 - 1 - math.log(5 / 3)]
    expected = ((-1.2 + 0.1 * k3[0]) + (-0.6 + 0.1 * k3[1])) / 2
    assert loss.item() == pytest.approx(expected, abs=1e-6)
    assert stats["clip_frac"] == pytest.approx(0.5) and stats["tokens"] == 2
    assert stats["kl"] == pytest.approx(sum(k3) / 2, abs=1e-6)


def test_masked_positions_get_exactly_zero_gradient():
    logp = torch.tensor([[-0.5, -80.0, -0.7, -1e4]], requires_grad=True)
    behavior = torch.tensor([[-0.6, 0.0, -0.6, 0.0]])
    ref = torch.tensor([[-0.4, 50.0, -0.9, 0.0]])
    mask = torch.tensor([[1, 0, 1, 0]])
    for agg in ("token-mean", "seq-mean-token-mean"):
        for kind in ("k1", "k2", "k3"):
            logp.grad = None
            loss, _ = grpo_loss(logp, behavior, ref, torch.tensor([0.7]), mask, kl_coef=0.5, kl_kind=kind, agg=agg)
            loss.backward()
            assert torch.isfinite(loss)
            assert logp.grad[0, 1].item() == 0.0 and logp.grad[0, 3].item() == 0.0
            assert logp.grad[0, 0].item() != 0.0 and logp.grad[0, 2].item() != 0.0


def test_identical_rewards_give_zero_policy_gradient():
    adv = group_advantages(torch.tensor([0.4, 0.4, 0.4]), ["s", "s", "s"])
    assert adv.tolist() == [0.0, 0.0, 0.0]
    logp = torch.randn(3, 5, requires_grad=True)
    loss, _ = grpo_loss(logp, logp.detach() - 0.1, None, adv, torch.ones(3, 5), kl_coef=0.0)
    loss.backward()
    assert torch.count_nonzero(logp.grad) == 0


def test_target_logprobs_match_full_logits_in_values_and_gradients(tiny_dir):
    from bat.policy.loader import load_model
    from bat.train.losses import target_logprobs

    model = load_model(tiny_dir).train()
    gen = torch.Generator().manual_seed(3)
    ids = torch.randint(5, 200, (2, 40), generator=gen)
    attn = torch.ones_like(ids)
    attn[1, 33:] = 0
    mask = torch.zeros(2, 39, dtype=torch.long)
    mask[0, 20:30], mask[1, 25:32] = 1, 1  # row 1's targets differ from row 0's: the union is computed
    temp = torch.tensor([0.7, 1.0])
    results = []
    for targets_only in (True, False):
        model.zero_grad()
        logp = target_logprobs(model, ids, attn, mask, temp, targets_only=targets_only)
        assert logp.shape == (2, 39)
        torch.where(mask.bool(), logp, 0.0).sum().backward()
        grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
        results.append((logp.detach(), grads))
    (kept, kept_grads), (full, full_grads) = results
    m = mask.bool()
    assert torch.allclose(kept[m], full[m], atol=1e-5)
    assert not kept[~m & ~mask.bool().any(0).expand_as(m)].any()  # outside the union nothing was projected
    assert len(kept_grads) == len(full_grads)
    assert all(torch.allclose(a, b, atol=1e-5, rtol=1e-4) for a, b in zip(kept_grads, full_grads))


def test_target_logprobs_without_targets_still_builds_a_graph(tiny_dir):
    from bat.policy.loader import load_model
    from bat.train.losses import target_logprobs

    model = load_model(tiny_dir).train()
    ids = torch.randint(5, 200, (1, 12))
    logp = target_logprobs(model, ids, torch.ones_like(ids), torch.zeros(1, 11, dtype=torch.long))
    assert logp.shape == (1, 11) and logp.requires_grad
