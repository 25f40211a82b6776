"""Group-shared prompts: log-probs and gradients of a prefix computed once equal those of full forwards."""

from __future__ import annotations

import pytest
import torch

from bat.policy.loader import load_model
from bat.train.losses import target_logprobs
from bat.train.shared_prefix import shared_prefix_length, shared_prefix_logprobs


def _group(prefix: int, tails: list[int], vocab: int, seed: int) -> tuple[torch.Tensor, ...]:
    """Right-padded rows sharing `prefix` tokens, each with its own tail; the last half of each tail trained."""
    gen = torch.Generator().manual_seed(seed)
    shared = torch.randint(5, vocab, (prefix,), generator=gen)
    width = prefix + max(tails)
    ids = torch.zeros(len(tails), width, dtype=torch.long)
    attn = torch.zeros_like(ids)
    mask = torch.zeros_like(ids)
    for row, n in enumerate(tails):
        ids[row, : prefix + n] = torch.cat([shared, torch.randint(5, vocab, (n,), generator=gen)])
        attn[row, : prefix + n] = 1
        mask[row, prefix + n // 2 : prefix + n] = 1
    return ids, attn, mask


def test_shared_prefix_length_stops_at_first_difference_and_first_trained_token():
    rows = [[1, 2, 3, 4, 5], [1, 2, 3, 9, 5], [1, 2, 3, 4]]
    assert shared_prefix_length(rows, [[0] * 5, [0] * 5, [0] * 4]) == 3
    assert shared_prefix_length(rows, [[0, 0, 1, 1, 1], [0] * 5, [0] * 4]) == 2
    assert shared_prefix_length([[7, 7]], [[0, 0]]) == 2
    assert shared_prefix_length([], []) == 0


@pytest.mark.parametrize("targets_only", [True, False])
def test_shared_prefix_logprobs_and_gradients_equal_full_forwards(tiny_dir, targets_only):
    torch.manual_seed(0)
    full_model = load_model(tiny_dir).train()
    shared_model = load_model(tiny_dir).train()
    vocab = full_model.config.vocab_size
    ids, attn, mask = _group(prefix=24, tails=[10, 17, 6, 13], vocab=vocab, seed=1)
    shifted = mask[:, 1:]
    temperature = torch.tensor([0.7, 0.7, 1.0, 0.0])
    prefix = shared_prefix_length(ids.tolist(), mask.tolist())
    assert prefix == 24

    full = target_logprobs(full_model, ids, attn, shifted, temperature, targets_only=targets_only)
    shared = shared_prefix_logprobs(shared_model, ids, attn, shifted, temperature, prefix, targets_only=targets_only)
    m = shifted.bool()
    torch.testing.assert_close(shared[m], full[m], rtol=1e-5, atol=1e-5)

    weights = torch.linspace(-1.0, 1.0, steps=int(m.sum()))
    (full[m] * weights).sum().backward()
    (shared[m] * weights).sum().backward()
    for (name, a), (_, b) in zip(full_model.named_parameters(), shared_model.named_parameters()):
        assert b.grad is not None, name
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-4, atol=1e-6, msg=name)


def test_shared_prefix_refuses_a_prefix_that_is_trained(tiny_dir):
    model = load_model(tiny_dir)
    ids, attn, mask = _group(prefix=8, tails=[6, 6], vocab=model.config.vocab_size, seed=2)
    mask[0, 3] = 1
    with pytest.raises(ValueError, match="inside the shared prefix"):
        shared_prefix_logprobs(model, ids, attn, mask[:, 1:], None, 8)
