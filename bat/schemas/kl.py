"""The route's KL check, one chunk of probe prompts at a time (`bat.curriculum.kl_chunks`)."""

from __future__ import annotations

from pydantic import Field

from bat.schemas.base import Record


class KlChunk(Record):
    """KL(candidate || reference) summed over one chunk's sampled continuation tokens, and the sampler's state after
    it, so that a requeued route continues with the next chunk exactly as an uninterrupted one would. A record whose
    `key` differs from the current check's (other checkpoints, prompts, seed, tokens or dtype) is stale."""

    key: str
    """Digest of what the chunk measured: candidate, reference, all probe prompts, seed, new tokens, dtype, chunk size."""
    index: int = Field(ge=0)
    """Chunk number; chunk i holds probe prompts [i * size, (i + 1) * size)."""
    prompts: int = Field(ge=1)
    """Probe prompts in this chunk."""
    kl_sum: float
    """Sum of the per-token KL over the chunk's continuation tokens."""
    tokens: int = Field(ge=0)
    """Continuation tokens the sum runs over."""
    rng_state: str
    """torch's CPU generator state after the chunk (base64), where the next chunk's sampling starts."""
