"""The route's KL check in chunks of probe prompts, each kept under `route/kl/` as it finishes (`KlChunk`), so that a
requeued route continues with the first unfinished chunk instead of starting over; and the interval the chunks give.

Chunk i scores probe prompts [i * CHUNK, (i + 1) * CHUNK) with `bat.train.kl_estimate`'s batch (one chunk = one of
its batches), starting from the sampler state the previous chunk left, so a resumed check draws exactly the
continuations an uninterrupted one draws and gives the same number as `estimate_kl` with the same seed.

Reads: the two checkpoints (loaded once, on the CPU, in `model.dtype`, only when a chunk is missing) and the chunk
records. Writes: one `KlChunk` per chunk through `bat.state.atomic` (`RoundLayout.kl_chunk`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bat.schemas.kl import KlChunk
from bat.state.atomic import atomic_write_json, read_json

CHUNK = 8
"""Probe prompts per chunk: `estimate_kl`'s batch size, so chunks are its batches."""


@dataclass(frozen=True)
class KlEstimate:
    """Mean per-token KL over every chunk, its 95% half-width across chunks (None with one chunk), and how much of it
    came from chunks an earlier attempt finished."""

    mean: float
    half_width: float | None
    prompts: int
    tokens: int
    chunks: int
    resumed: int


@dataclass(frozen=True)
class KlInputs:
    """Everything a chunk's number depends on: the two checkpoints, the prompts (chat message lists or token ids),
    the sampling seed and length, the dtype and the tool list the prompts are rendered with (empty = none)."""

    candidate: str
    reference: str
    prompts: Sequence[Any]
    seed: int
    new_tokens: int
    dtype: str
    tools: Sequence[dict[str, Any]] = ()

    def key(self) -> str:
        """Digest of these inputs (a chunk kept under another key is not reused)."""
        payload = [self.candidate, self.reference, list(self.prompts), self.seed, self.new_tokens, self.dtype, CHUNK]
        payload += [list(self.tools)] if self.tools else []
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:32]


def ratio_interval(sums: Sequence[float], counts: Sequence[int]) -> float | None:
    """95% half-width of the ratio sum(sums) / sum(counts) from the spread across chunks (ratio estimator, Student t);
    None with fewer than two chunks or no tokens."""
    n, total = len(sums), sum(counts)
    if n < 2 or total == 0:
        return None
    from scipy.stats import t

    ratio = sum(sums) / total
    residual = sum((s - ratio * c) ** 2 for s, c in zip(sums, counts))
    variance = n / (n - 1) * residual / total**2
    return float(t.ppf(0.975, n - 1) * math.sqrt(variance))


def _finished(path_of: Callable[[int], Path], key: str, chunks: int) -> list[KlChunk]:
    """The leading chunks an earlier attempt finished for this key (stops at the first missing or stale one)."""
    done = []
    for index in range(chunks):
        path = path_of(index)
        if not path.exists():
            break
        record = KlChunk.model_validate(read_json(path))
        if record.key != key or record.index != index:
            break
        done.append(record)
    return done


def chunked_kl(
    path_of: Callable[[int], Path],
    candidate: str,
    reference: str,
    prompts: Sequence[Any],
    *,
    seed: int,
    new_tokens: int,
    dtype: str,
    tools: Sequence[dict[str, Any]] = (),
    log: Callable[[str], None] = lambda _: None,
) -> KlEstimate:
    """KL(candidate || reference) over `prompts` (chat message lists, rendered with the tool list `tools` in their
    system turn, as the policy saw them; empty = no tool list), chunk by chunk, keeping each finished chunk at
    `path_of(i)`."""
    inputs = KlInputs(candidate, reference, prompts, seed, new_tokens, dtype, tuple(tools))
    chunks = math.ceil(len(prompts) / CHUNK)
    records = _finished(path_of, inputs.key(), chunks)
    resumed = len(records)
    if resumed < chunks:
        records += _score(path_of, inputs, records, log)
    sums, counts = [r.kl_sum for r in records], [r.tokens for r in records]
    return KlEstimate(
        mean=sum(sums) / max(sum(counts), 1),
        half_width=ratio_interval(sums, counts),
        prompts=len(prompts),
        tokens=sum(counts),
        chunks=chunks,
        resumed=resumed,
    )


def _score(
    path_of: Callable[[int], Path], inputs: KlInputs, done: list[KlChunk], log: Callable[[str], None]
) -> list[KlChunk]:
    """Load both models once and score the chunks after `done`, writing each as it finishes."""
    import torch

    from bat.policy.loader import load_model, load_tokenizer
    from bat.train.kl_estimate import _kl_batch, _prompt_ids

    cand = load_model(inputs.candidate, dtype=inputs.dtype)
    ref = load_model(inputs.reference, dtype=inputs.dtype)
    if cand.config.vocab_size != ref.config.vocab_size:
        raise ValueError(
            f"vocabularies differ: candidate {cand.config.vocab_size} vs reference {ref.config.vocab_size}"
        )
    tokenizer = load_tokenizer(inputs.candidate)
    if done:
        torch.set_rng_state(torch.frombuffer(bytearray(base64.b64decode(done[-1].rng_state)), dtype=torch.uint8))
    else:
        torch.manual_seed(inputs.seed)
    written = []
    key, chunks, tools = inputs.key(), math.ceil(len(inputs.prompts) / CHUNK), list(inputs.tools)
    for index in range(len(done), chunks):
        batch = [_prompt_ids(tokenizer, p, tools) for p in inputs.prompts[index * CHUNK : (index + 1) * CHUNK]]
        kl_sum, tokens = _kl_batch(cand, ref, tokenizer, batch, inputs.new_tokens, 1.0)
        state = base64.b64encode(torch.get_rng_state().numpy().tobytes()).decode()
        record = KlChunk(key=key, index=index, prompts=len(batch), kl_sum=kl_sum, tokens=tokens, rng_state=state)
        atomic_write_json(path_of(index), record)
        written.append(record)
        log(f"KL chunk {index + 1}/{chunks}: {tokens} tokens")
    return written
