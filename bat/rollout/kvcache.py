"""Per-rollout KV caches for the `hf` engine, stacked into one left-padded batch and split back after a step.

Row i of a batch is `pad_i` pad tokens followed by its context; its cache covers the first `c_i` context
tokens. The batch cache covers the first P = min_i(pad_i + c_i) positions of every padded row: row i gets
`pad_i` zero slots (masked by the attention mask) and then its own first P - pad_i cached positions, so
`generate` only prefills positions P.. of the batch. Keys were stored with their true positions, and new
tokens get positions from the attention mask, so the result equals a full prefill (tests check this).

Decoding appends one position a step. transformers' `DynamicLayer` concatenates, which copies the whole cache of
every layer on every step (at a few thousand positions that copy is most of a decode step on CPU); a
`ReservedCache` writes into buffers with room reserved for the step's new tokens instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import Cache, DynamicLayer


class ReservedLayer(DynamicLayer):
    """A cache layer whose `keys`/`values` are views of the first `length` positions of larger buffers: an update
    writes in place, and a buffer is reallocated (with `reserve` spare positions) only when an update overflows it."""

    def __init__(self, reserve: int) -> None:
        super().__init__()
        self.reserve = max(0, int(reserve))
        self.length = 0
        self._keys: torch.Tensor | None = None
        self._values: torch.Tensor | None = None

    def _room_for(self, total: int, like: torch.Tensor) -> None:
        """Buffers of at least `total` positions holding the current ones."""
        if self._keys is not None and total <= self._keys.shape[2]:
            return
        shape = (like.shape[0], like.shape[1], total + self.reserve, like.shape[3])
        keys = torch.empty(shape, dtype=like.dtype, device=like.device)
        values = torch.empty(shape, dtype=like.dtype, device=like.device)
        if self._keys is not None and self.length:
            keys[:, :, : self.length] = self._keys[:, :, : self.length]
            values[:, :, : self.length] = self._values[:, :, : self.length]  # type: ignore[index]
        self._keys, self._values = keys, values

    def _views(self) -> None:
        assert self._keys is not None and self._values is not None
        self.keys, self.values = self._keys[:, :, : self.length], self._values[:, :, : self.length]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        """Append `[B, H, n, D]` keys and values in place; returns the views of every cached position."""
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        start, end = self.length, self.length + key_states.shape[-2]
        self._room_for(end, key_states)
        assert self._keys is not None and self._values is not None
        self._keys[:, :, start:end] = key_states
        self._values[:, :, start:end] = value_states
        self.length = end
        self._views()
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length

    def crop(self, tokens_to_remove: int) -> None:
        if tokens_to_remove < 0 and self.length:
            self.length = max(0, self.length + tokens_to_remove)
            self._views()

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep only the batch rows `indices` (the buffers shrink with them, spare positions kept)."""
        if self._keys is not None and self._values is not None:
            self._keys, self._values = self._keys[indices], self._values[indices]
            self._views()

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self._keys is not None and self._values is not None:
            self._keys = self._keys.repeat_interleave(repeats, dim=0)
            self._values = self._values.repeat_interleave(repeats, dim=0)
            self._views()


class ReservedCache(DynamicCache):
    """A DynamicCache of `ReservedLayer`s (one per decoder layer, `reserve` spare positions each)."""

    def __init__(self, num_layers: int, reserve: int) -> None:
        Cache.__init__(self, layers=[ReservedLayer(reserve) for _ in range(num_layers)])


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


def stack(
    entries: Sequence[tuple[list[int], Any] | None], pads: Sequence[int], length: int, reserve: int = 0
) -> ReservedCache:
    """One batch cache of `length` positions from per-row caches (zeros where a row has pads), with room for
    `reserve` more positions before any reallocation."""
    ref = next(e[1] for e in entries if e is not None)
    cache = ReservedCache(len(ref.layers), reserve)
    for index, layer in enumerate(ref.layers):
        shape = layer.keys.shape
        keys = torch.zeros((len(entries), shape[1], length, shape[3]), dtype=layer.keys.dtype, device=layer.keys.device)
        values = torch.zeros_like(keys)
        for row, (entry, pad) in enumerate(zip(entries, pads)):
            own = length - min(pad, length)
            if own > 0:
                cached = entry[1].layers[index]
                keys[row, :, length - own :] = cached.keys[0, :, :own]
                values[row, :, length - own :] = cached.values[0, :, :own]
        cache.layers[index].update(keys, values)
    return cache


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
