"""GRPO loss terms (Eqs. 4, 17-19) as pure tensor functions, small enough to check by hand.

Shapes: per-token tensors are `[B, T]` with a 0/1 (or bool) `mask` of the same shape; `adv` is `[B]`.
Masked positions are selected out with `torch.where`, so they receive exactly zero gradient even when
their log-probabilities are extreme.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from typing import Any, Literal

import torch

KL_ESTIMATORS = ("k1", "k2", "k3")
AGG_MODES = ("token-mean", "seq-mean-token-mean")
KlKind = Literal["k1", "k2", "k3"]
AggMode = Literal["token-mean", "seq-mean-token-mean"]


def group_advantages(
    rewards: torch.Tensor,
    group_ids: Sequence[str],
    valid: torch.Tensor | None = None,
    *,
    normalize_std: bool = True,
    eps: float = 1e-6,
) -> torch.Tensor:
    """A_i = (r_i - mean_g(r)) / (std_g(r) + eps) within each group g (Eq. 4); invalid members get 0.

    Group statistics use valid members only; std is the population std over the group's valid members,
    and a group whose rewards are all equal gets advantage 0 (no 0/0 when eps is 0).
    With `normalize_std=False` the advantage is just r - mean.
    """
    rewards = rewards.to(torch.float64)
    valid = torch.ones_like(rewards, dtype=torch.bool) if valid is None else valid.to(torch.bool)
    if len(group_ids) != rewards.numel() or valid.numel() != rewards.numel():
        raise ValueError(
            f"rewards ({rewards.numel()}), group_ids ({len(group_ids)}) and valid "
            f"({valid.numel()}) must have one entry per rollout"
        )
    adv = torch.zeros_like(rewards)
    for group in dict.fromkeys(group_ids):
        members = torch.tensor([g == group for g in group_ids]) & valid
        if not members.any():
            continue
        values = rewards[members]
        centred = values - values.mean()
        if normalize_std:
            std = values.std(unbiased=False)
            centred = centred / (std + eps) if std > 0 else torch.zeros_like(centred)
        adv[members] = centred
    return adv.to(torch.float32)


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, kind: KlKind = "k3") -> torch.Tensor:
    """Per-token estimate of KL(pi_theta || pi_ref) from sampled-token log-probs.

    With x = log pi_ref - log pi_theta: k1 = -x, k2 = x^2 / 2, k3 = exp(x) - 1 - x (Schulman's estimators).
    """
    if kind not in KL_ESTIMATORS:
        raise ValueError(f"kl estimator {kind!r} is not valid; valid estimators: {list(KL_ESTIMATORS)}")
    x = ref_logp - logp
    if kind == "k1":
        return -x
    if kind == "k2":
        return 0.5 * x * x
    return torch.exp(x) - 1.0 - x


def clipped_objective(
    logp: torch.Tensor,
    behavior_logp: torch.Tensor,
    adv: torch.Tensor,
    clip_eps: float,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """g = min(w A, clip(w, 1-eps, 1+eps) A), w = exp(logp - behavior_logp) (Eqs. 17-18).

    Returns (g per token, bool tensor marking tokens where the clipped branch is the minimum).
    """
    log_ratio = logp - behavior_logp
    if mask is not None:
        log_ratio = torch.where(mask.to(torch.bool), log_ratio, torch.zeros_like(log_ratio))
    ratio = torch.exp(log_ratio)
    a = adv.unsqueeze(-1) if adv.dim() == ratio.dim() - 1 else adv
    unclipped = ratio * a
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * a
    return torch.minimum(unclipped, clipped), clipped < unclipped


def aggregate_parts(values: torch.Tensor, mask: torch.Tensor, mode: AggMode) -> tuple[torch.Tensor, torch.Tensor]:
    """(numerator, denominator) of an aggregation so micro-batches and ranks can be combined exactly.

    token-mean: sum of masked values / number of masked tokens.
    seq-mean-token-mean: sum over sequences of their masked token means / number of sequences with tokens.
    """
    if mode not in AGG_MODES:
        raise ValueError(f"loss aggregation {mode!r} is not valid; valid modes: {list(AGG_MODES)}")
    m = mask.to(torch.bool)
    picked = torch.where(m, values, torch.zeros_like(values))
    if mode == "token-mean":
        return picked.sum(), m.sum().to(values.dtype)
    counts = m.sum(dim=-1)
    has = counts > 0
    per_seq = picked.sum(dim=-1) / counts.clamp(min=1).to(values.dtype)
    return torch.where(has, per_seq, torch.zeros_like(per_seq)).sum(), has.sum().to(values.dtype)


def aggregate(values: torch.Tensor, mask: torch.Tensor, mode: AggMode) -> torch.Tensor:
    """Aggregate per-token values over `mask` with `mode` (0 when nothing is masked in)."""
    num, den = aggregate_parts(values, mask, mode)
    return num / den.clamp(min=1)


def grpo_token_loss(
    logp: torch.Tensor,
    behavior_logp: torch.Tensor,
    ref_logp: torch.Tensor | None,
    adv: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_eps: float,
    kl_coef: float,
    kl_kind: KlKind = "k3",
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Per-token loss -g + beta * KL (Eq. 19 negated) and per-token stats (kl, clipped, ratio)."""
    g, clipped = clipped_objective(logp, behavior_logp, adv, clip_eps, mask)
    loss = -g
    if ref_logp is not None and kl_coef > 0.0:
        m = mask.to(torch.bool)
        kl = kl_penalty(torch.where(m, logp, ref_logp), ref_logp, kl_kind)
        loss = loss + kl_coef * kl
    else:
        kl = torch.zeros_like(logp)
    return loss, {"kl": kl.detach(), "clipped": clipped.detach()}


def grpo_loss(
    logp: torch.Tensor,
    behavior_logp: torch.Tensor,
    ref_logp: torch.Tensor | None,
    adv: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_eps: float = 0.2,
    kl_coef: float = 1e-3,
    kl_kind: KlKind = "k3",
    agg: AggMode = "token-mean",
) -> tuple[torch.Tensor, dict[str, float]]:
    """Whole-batch GRPO loss (to minimise) and stats: mean KL and clip fraction over masked tokens."""
    per_token, stats = grpo_token_loss(
        logp, behavior_logp, ref_logp, adv, mask, clip_eps=clip_eps, kl_coef=kl_coef, kl_kind=kl_kind
    )
    m = mask.to(torch.bool)
    tokens = max(int(m.sum()), 1)
    return aggregate(per_token, mask, agg), {
        "kl": float(torch.where(m, stats["kl"], 0.0).sum()) / tokens,
        "clip_frac": float((stats["clipped"] & m).sum()) / tokens,
        "tokens": float(m.sum()),
    }


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[targets] per position; logits `[B, T, V]`, targets `[B, T]`."""
    logps = torch.log_softmax(logits.float(), dim=-1)
    return torch.gather(logps, -1, targets.unsqueeze(-1)).squeeze(-1)


@functools.cache
def _class_accepts_logits_to_keep(cls: type) -> bool:
    forward = getattr(cls, "forward", None)
    try:
        return forward is not None and "logits_to_keep" in inspect.signature(forward).parameters
    except (TypeError, ValueError):
        return False


def accepts_logits_to_keep(model: Any) -> bool:
    """Whether the (possibly engine- or peft-wrapped) HF model's forward takes `logits_to_keep` (once per class; a
    peft model passes it on to the model it wraps, its `get_base_model()`)."""
    inner = getattr(model, "module", model)
    unwrap = getattr(inner, "get_base_model", None)
    return _class_accepts_logits_to_keep(type(unwrap() if callable(unwrap) else inner))


def target_logprobs(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    loss_mask: torch.Tensor | None,
    temperature: torch.Tensor | None = None,
    *,
    targets_only: bool = True,
) -> torch.Tensor:
    """log pi(token_{t+1} | tokens_<=t) per position t, `[B, T-1]`, for `input_ids` `[B, T]`.

    With `targets_only` (and a model whose forward takes `logits_to_keep`), hidden states are projected to the
    vocabulary only at the positions where some row's shifted `loss_mask` (`[B, T-1]`) is set: the same values
    and gradients there, without the `[B, T, V]` logits of every context token (a 135M policy's vocabulary
    projection and log-softmax on 8k-token contexts dominate memory). Other positions hold 0 and must stay
    masked. Without a `loss_mask` every position is computed. `temperature` (`[B]`, values <= 0 read as 1)
    divides the logits row-wise."""
    mask = loss_mask if targets_only else None
    return forward_logprobs(model, input_ids, mask, temperature, attention_mask=attention_mask)


def forward_logprobs(
    model: Any,
    input_ids: torch.Tensor,
    loss_mask: torch.Tensor | None,
    temperature: torch.Tensor | None,
    **forward: Any,
) -> torch.Tensor:
    """One forward of `input_ids` `[B, n]` (extra model arguments in `forward`, e.g. a KV cache and positions)
    and log pi(token_{j+1} | ...) per position j, `[B, n-1]`. With a shifted `loss_mask` (`[B, n-1]`) and a model
    taking `logits_to_keep`, vocabulary logits are computed only where some row trains (other positions hold 0);
    `temperature` (`[B]`, values <= 0 read as 1) divides the logits row-wise."""
    if loss_mask is not None and accepts_logits_to_keep(model):
        keep = loss_mask.bool().any(dim=0).nonzero().squeeze(-1)
        if keep.numel() == 0:
            keep = torch.zeros(1, dtype=torch.long, device=input_ids.device)
        logits = model(input_ids=input_ids, logits_to_keep=keep, **forward).logits
        targets = input_ids[:, 1:].index_select(1, keep)
    else:
        keep = None
        logits = model(input_ids=input_ids, **forward).logits[:, :-1]
        targets = input_ids[:, 1:]
    if temperature is not None:
        temp = torch.where(temperature > 0, temperature, torch.ones_like(temperature))
        logits = logits / temp[:, None, None].to(logits.dtype)
    logp = token_logprobs(logits, targets)
    if keep is None:
        return logp
    full = torch.zeros(input_ids.shape[0], input_ids.shape[1] - 1, dtype=logp.dtype, device=logp.device)
    return full.index_copy(1, keep, logp)
