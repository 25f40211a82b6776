"""KL(candidate || reference) over a fixed prompt set: zero for equal weights, positive and reproducible otherwise."""

from __future__ import annotations

import pytest

from bat.train.kl_estimate import estimate_kl

PROMPTS = [[{"role": "user", "content": f"Use read_file on data/{name}.txt."}] for name in ("a", "plan", "cases")]


def test_kl_is_zero_for_identical_and_positive_for_different_models(tiny_dir, small_cfg, tiny_model_builder):
    assert estimate_kl(tiny_dir, tiny_dir, PROMPTS, max_new_tokens=8, tools=[]) == 0.0
    other = tiny_model_builder(small_cfg, 8)
    first = estimate_kl(other, tiny_dir, PROMPTS, max_new_tokens=8, tools=[], seed=3)
    again = estimate_kl(other, tiny_dir, PROMPTS, max_new_tokens=8, tools=[], seed=3)
    assert first > 0.0 and first == again
    assert estimate_kl(other, tiny_dir, [[1, 2, 3, 4]], max_new_tokens=4) > 0.0


def test_kl_rejects_mismatched_vocabularies_and_empty_prompts(tiny_dir, small_cfg, tiny_model_builder):
    bigger = tiny_model_builder(small_cfg.model_copy(update={"vocab_size": 600}), 7)
    with pytest.raises(ValueError, match="vocabularies differ"):
        estimate_kl(bigger, tiny_dir, PROMPTS, tools=[])
    with pytest.raises(ValueError, match="at least one prompt"):
        estimate_kl(tiny_dir, tiny_dir, [])


def test_continuation_logits_only_give_the_full_logits_kl(tiny_dir, small_cfg, tiny_model_builder, monkeypatch):
    import bat.train.losses as losses
    from bat.policy.loader import load_model

    other = tiny_model_builder(small_cfg, 8)
    assert losses.accepts_logits_to_keep(load_model(other))  # the fast path is the one under test
    kept = estimate_kl(other, tiny_dir, PROMPTS, max_new_tokens=8, tools=[], seed=5)
    monkeypatch.setattr(losses, "accepts_logits_to_keep", lambda model: False)
    full = estimate_kl(other, tiny_dir, PROMPTS, max_new_tokens=8, tools=[], seed=5)
    assert kept > 0.0 and kept == pytest.approx(full, rel=1e-5)
