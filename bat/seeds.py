"""Deterministic seeds derived from (run seed, round, phase, shard, ...): stable across processes and hosts."""

from __future__ import annotations

import hashlib


def derive_seed(run_seed: int, *parts: object) -> int:
    """Return a 31-bit seed from the run seed and any labels (ints/strings); same inputs, same seed."""
    text = "/".join([str(run_seed), *(str(p) for p in parts)])
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:4], "big") & 0x7FFFFFFF


def derive_wide_seed(root: object, *parts: object) -> int:
    """Return a 128-bit seed from `root` and any labels; same inputs, same seed.

    For seeds that must not be found by enumeration (the held-out instances): a 31-bit seed space can be searched
    exhaustively by code that can generate instances, a 128-bit one cannot.
    """
    text = "/".join([str(root), *(str(p) for p in parts)])
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:16], "big")
