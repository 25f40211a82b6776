"""Round mixture (Eq. 5): exact per-batch pool counts and a seeded sampler without replacement inside a round."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence

from bat.seeds import derive_seed

POOL_ORDER = ("S-target", "S-mix", "E2E")


def pool_counts(pools: Sequence[str], rho: Mapping[str, float], batch_size: int) -> dict[str, int]:
    """Rows per batch for each enabled pool: batch_size * rho renormalised over `pools`, largest remainder.

    Default (all pools, rho 1/2, 1/4, 1/4, batch 8) gives exactly 4 / 2 / 2. Ties in remainders go to the
    earlier pool in (S-target, S-mix, E2E).
    """
    unknown = sorted(set(pools) - set(POOL_ORDER))
    if unknown:
        raise ValueError(f"unknown pools {unknown}; valid: {list(POOL_ORDER)}")
    enabled = [p for p in POOL_ORDER if p in pools]
    if not enabled:
        raise ValueError(f"no pool enabled; choose from {list(POOL_ORDER)}")
    total = sum(float(rho.get(p, 0.0)) for p in enabled)
    if total <= 0:
        raise ValueError(f"rho gives zero weight to every enabled pool {enabled}: {dict(rho)}")
    exact = {p: batch_size * float(rho.get(p, 0.0)) / total for p in enabled}
    counts = {p: math.floor(exact[p] + 1e-9) for p in enabled}
    left = batch_size - sum(counts.values())
    by_remainder = sorted(enabled, key=lambda p: (-(exact[p] - counts[p]), POOL_ORDER.index(p)))
    for pool in by_remainder[:left]:
        counts[pool] += 1
    return counts


class PoolExhaustedError(ValueError):
    """A pool holds fewer rows than one round draws and `curriculum.exhausted` is `error`."""


def sample_round(
    pool_ids: Mapping[str, Sequence[str]],
    counts: Mapping[str, int],
    batches: int,
    seed: int,
    *,
    exhausted: str = "cycle",
) -> tuple[list[list[tuple[str, str]]], dict[str, int]]:
    """Draw `batches` batches of (pool, state_id) with exactly `counts[pool]` rows from each pool.

    Each pool is a seeded permutation consumed without replacement; a new round (new `seed`) starts fresh.
    When a pool runs out: `exhausted="error"` raises, `"cycle"` starts a new permutation. Returns the batches
    and the number of permutations used per pool.
    """
    if exhausted not in ("error", "cycle"):
        raise ValueError(f"exhausted must be 'error' or 'cycle', got {exhausted!r}")
    streams: dict[str, list[str]] = {}
    passes: dict[str, int] = {}
    for pool, n in counts.items():
        ids = sorted(pool_ids.get(pool, ()))
        need = n * batches
        if need and not ids:
            raise PoolExhaustedError(f"pool {pool} is empty but the mixture needs {n} rows per batch")
        if need > len(ids) and exhausted == "error":
            raise PoolExhaustedError(
                f"pool {pool} has {len(ids)} rows but {batches} batches x {n} need {need}; "
                "set curriculum.exhausted = 'cycle' or fewer batches_per_round"
            )
        stream: list[str] = []
        used = 0
        while len(stream) < need:
            perm = list(ids)
            random.Random(derive_seed(seed, "pool", pool, used)).shuffle(perm)
            stream.extend(perm)
            used += 1
        streams[pool], passes[pool] = stream[:need], used
    out: list[list[tuple[str, str]]] = []
    for b in range(batches):
        batch = []
        for pool in POOL_ORDER:
            n = counts.get(pool, 0)
            batch.extend((pool, sid) for sid in streams.get(pool, [])[b * n : (b + 1) * n])
        out.append(batch)
    return out, passes
