"""Per-rollout KV caches for the `hf` engine, stacked into one left-padded batch and split back after a step.

Row i of a batch is `pad_i` pad tokens followed by its context; its cache covers the first `c_i` context
tokens. The batch cache covers the first P = min_i(pad_i + c_i) positions of every padded row: row i gets
`pad_i` zero slots (masked by the attention mask) and then its own first P - pad_i cached positions, so
`generate` only prefills positions P.. of the batch. Keys were stored with their true positions, and new
tokens get positions from the attention mask, so the result equals a full prefill (tests check this).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers import DynamicCache


def usable(entry: tuple[list[int], Any] | None, prompt: Sequence[int]) -> tuple[list[int], Any] | None:
    """The cached (ids, cache) when `prompt` strictly extends the cached ids, else None."""
    if entry is None:
        return None
    ids, _cache = entry
    if len(prompt) > len(ids) and list(prompt[: len(ids)]) == ids:
        return entry
    return None


def batch_prefix(entries: Sequence[tuple[list[int], Any] | None], pads: Sequence[int]) -> int:
    """P: positions of the padded batch every row has cached (0 when no row has a cache)."""
    if all(e is None for e in entries):
        return 0
    return min(pad + (len(e[0]) if e is not None else 0) for e, pad in zip(entries, pads))


def stack(entries: Sequence[tuple[list[int], Any] | None], pads: Sequence[int], length: int) -> DynamicCache:
    """One batch cache of `length` positions from per-row caches (zeros where a row has pads)."""
    ref = next(e[1] for e in entries if e is not None)
    layers = []
    for index, layer in enumerate(ref.layers):
        shape, dtype, device = layer.keys.shape, layer.keys.dtype, layer.keys.device
        keys, values = [], []
        for entry, pad in zip(entries, pads):
            zeros = torch.zeros((1, shape[1], min(pad, length), shape[3]), dtype=dtype, device=device)
            own = length - min(pad, length)
            if own > 0:
                row = entry[1].layers[index]
                keys.append(torch.cat([zeros, row.keys[:, :, :own]], dim=2))
                values.append(torch.cat([zeros, row.values[:, :, :own]], dim=2))
            else:
                keys.append(zeros)
                values.append(zeros.clone())
        layers.append((torch.cat(keys, dim=0), torch.cat(values, dim=0)))
    return DynamicCache(ddp_cache_data=layers)


def split(cache: DynamicCache, row: int, pad: int, keep: int) -> DynamicCache:
    """Row `row`'s own cache: positions pad .. pad+keep of the batch cache, copied out (no batch memory kept)."""
    return DynamicCache(
        ddp_cache_data=[
            (
                layer.keys[row : row + 1, :, pad : pad + keep].clone(),
                layer.values[row : row + 1, :, pad : pad + keep].clone(),
            )
            for layer in cache.layers
        ]
    )
