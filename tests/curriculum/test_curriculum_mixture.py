"""Exact batch composition, renormalisation over enabled pools, without-replacement sampling per round."""

from collections import Counter

import pytest

from bat.curriculum.mixture import PoolExhaustedError, pool_counts, sample_round

RHO = {"S-target": 0.5, "S-mix": 0.25, "E2E": 0.25}


def test_default_composition_is_4_2_2():
    assert pool_counts(("S-target", "S-mix", "E2E"), RHO, 8) == {"S-target": 4, "S-mix": 2, "E2E": 2}


def test_switched_off_pool_is_renormalised():
    assert pool_counts(("S-target", "S-mix"), RHO, 8) == {"S-target": 5, "S-mix": 3}  # 5.33 / 2.67
    assert pool_counts(("S-mix", "E2E"), RHO, 8) == {"S-mix": 4, "E2E": 4}
    assert pool_counts(("E2E",), RHO, 8) == {"E2E": 8}
    with pytest.raises(ValueError, match="valid"):
        pool_counts(("bogus",), RHO, 8)


def test_sampling_is_exact_and_without_replacement_inside_a_round():
    ids = {
        "S-target": [f"t{i}" for i in range(16)],
        "S-mix": [f"m{i}" for i in range(8)],
        "E2E": [f"e{i}" for i in range(8)],
    }
    counts = {"S-target": 4, "S-mix": 2, "E2E": 2}
    batches, passes = sample_round(ids, counts, 4, seed=7, exhausted="error")
    assert len(batches) == 4
    for batch in batches:
        assert Counter(pool for pool, _ in batch) == Counter(counts)
    drawn = [sid for batch in batches for _, sid in batch]
    assert len(drawn) == len(set(drawn)) == 32
    assert passes == {"S-target": 1, "S-mix": 1, "E2E": 1}
    again, _ = sample_round(ids, counts, 4, seed=7, exhausted="error")
    assert again == batches  # deterministic
    other, _ = sample_round(ids, counts, 4, seed=8, exhausted="error")
    assert other != batches  # a new round draws a fresh permutation


def test_exhausted_pool_errors_or_cycles():
    ids = {"E2E": ["a", "b", "c"]}
    with pytest.raises(PoolExhaustedError, match="cycle"):
        sample_round(ids, {"E2E": 2}, 2, seed=1, exhausted="error")
    batches, passes = sample_round(ids, {"E2E": 2}, 2, seed=1, exhausted="cycle")
    assert passes == {"E2E": 2}
    first_pass = [sid for b in batches for _, sid in b][:3]
    assert sorted(first_pass) == ["a", "b", "c"]
