"""Log-probs of a micro-batch whose rows share a token prefix, with that prefix computed once.

The K rollouts of a GRPO group start from the same prompt (system turn, tool list, task, and for a stage row the
replayed history up to its stage). Scoring them as K independent rows runs the prompt's forward and backward K
times. Here the shared prefix runs once into a KV cache, the cache is repeated for each row, and each row's own
continuation attends to it; gradients from every row flow back through the repeated cache into the one prefix
forward. Causal attention makes this the same function of the weights as K full forwards (equal up to float
summation order), so log-probs and gradients agree with `bat.train.losses.target_logprobs` on the padded batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from bat.train.losses import accepts_logits_to_keep, forward_logprobs


def shared_prefix_length(rows: Sequence[Sequence[int]], masks: Sequence[Sequence[int]]) -> int:
    """Tokens every row has in common at its start and that no row trains on: the longest common prefix of
    `rows`, cut before the first position any row's (unshifted, per-token) mask marks as trained."""
    if not rows:
        return 0
    limit = min(len(r) for r in rows)
    for mask in masks:
        first = next((i for i, m in enumerate(mask) if m), len(mask))
        limit = min(limit, first)
    first_row = rows[0]
    for i in range(limit):
        token = first_row[i]
        if any(r[i] != token for r in rows[1:]):
            return i
    return limit


def _untrained_head(loss_mask: torch.Tensor, prefix: int) -> int:
    """The `prefix - 1` tokens that run once; raises ValueError when that is under 1 token or `loss_mask` trains on
    one of them."""
    head = prefix - 1
    if head < 1:
        raise ValueError(f"a shared prefix needs at least 2 tokens, got {prefix}")
    if bool(loss_mask[:, :head].any()):
        raise ValueError(f"rows train on positions inside the shared prefix of {prefix} tokens")
    return head


def shared_prefix_logprobs(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    loss_mask: torch.Tensor,
    temperature: torch.Tensor | None,
    prefix: int,
    *,
    targets_only: bool = True,
) -> torch.Tensor:
    """log pi(token_{t+1} | tokens_<=t) per position t, `[B, T-1]`, like `target_logprobs`, for right-padded
    `input_ids` `[B, T]` whose rows all start with the same `prefix` tokens (see `shared_prefix_length`), none of
    them trained (`loss_mask` `[B, T-1]`, shifted, is 0 before position `prefix - 1`).

    The first `prefix - 1` tokens run once (batch 1) into a KV cache; each row's tokens from `prefix - 1` on run
    over the cache repeated to B rows. Positions before `prefix - 1` hold 0 (they are never trained). With
    `targets_only` (and a model taking `logits_to_keep`) vocabulary logits are computed only where some row
    trains. `temperature` (`[B]`, values <= 0 read as 1) divides the logits row-wise."""
    from transformers import DynamicCache

    batch, width = input_ids.shape
    head = _untrained_head(loss_mask, prefix)
    cache = DynamicCache()
    keep_kwarg = accepts_logits_to_keep(model)
    head_kwargs: dict[str, Any] = {"logits_to_keep": 1} if keep_kwarg else {}
    model(
        input_ids=input_ids[:1, :head], attention_mask=attention_mask[:1, :head], past_key_values=cache, **head_kwargs
    )
    if batch > 1:
        cache.batch_repeat_interleave(batch)
    positions = torch.arange(head, width, device=input_ids.device).unsqueeze(0).expand(batch, -1)
    tail = forward_logprobs(  # tail position j predicts token head + j + 1 (shifted position head + j)
        model,
        input_ids[:, head:],
        loss_mask[:, head:] if targets_only else None,
        temperature,
        attention_mask=attention_mask,
        past_key_values=cache,
        position_ids=positions,
    )
    full = torch.zeros(batch, width - 1, dtype=tail.dtype, device=tail.device)
    full[:, head:] = tail
    return full
