"""Mean per-token KL(candidate || reference) over a fixed prompt set (the fallback rule's tau check).

For each prompt the candidate samples a short continuation (seeded, so the estimate is reproducible);
at every continuation position the exact KL between the two next-token distributions is summed over the
vocabulary; the result is the mean over all continuation tokens (up to and including end-of-turn). Both models
are loaded in the policy's `model.dtype` (`dtype`); their logits are cast to fp32 before the log-softmax.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

Prompt = Sequence[dict[str, Any]] | Sequence[int]


def _prompt_ids(tokenizer: Any, prompt: Prompt, tools: Sequence[dict[str, Any]] | None) -> list[int]:
    from bat.policy.chat import encode_prompt

    if prompt and isinstance(prompt[0], int):
        return list(prompt)  # type: ignore[arg-type]
    if tools is None:
        try:
            from bat.benchmark import TOOL_SPECS as tools  # the tool list rollouts render
        except ImportError:
            tools = []
    return encode_prompt(tokenizer, list(prompt), tools)  # type: ignore[arg-type]


def _position_ids(attn: Any) -> Any:
    return (attn.cumsum(-1) - 1).clamp(min=0)


def _kl_batch(
    cand: Any, ref: Any, tokenizer: Any, batch: list[list[int]], max_new_tokens: int, temperature: float
) -> tuple[float, int]:
    """Sum of per-token KL over the candidate's continuations of `batch` (left-padded) and the token count."""
    import torch

    from bat.train.losses import accepts_logits_to_keep

    pad = tokenizer.pad_token_id
    width = max(len(p) for p in batch)
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in batch])
    attn = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch])
    out = cand.generate(
        input_ids=ids,
        attention_mask=attn,
        max_new_tokens=max_new_tokens,
        do_sample=True,
        temperature=temperature,
        top_k=0,
        top_p=1.0,
        pad_token_id=pad,
        eos_token_id=tokenizer.eos_token_id,
    )
    new = out[:, width:]
    is_eos = new == tokenizer.eos_token_id
    after_eos = (is_eos.cumsum(-1) - is_eos.long()) > 0  # positions after the first end-of-turn
    keep = ~after_eos
    full_attn = torch.cat([attn, keep.long()], dim=1)
    pos = _position_ids(full_attn)
    # only the positions that predict a continuation token need vocabulary logits (the prompt's would cost
    # prompt length x vocabulary floats per row); `logits_to_keep` keeps the last n; the slice is the same without it
    n = new.shape[1] + 1
    with torch.no_grad():
        logits = []
        for model in (cand, ref):
            keep_kwarg = {"logits_to_keep": n} if accepts_logits_to_keep(model) else {}
            inputs = {"input_ids": out, "attention_mask": full_attn, "position_ids": pos}
            logits.append(model(**inputs, **keep_kwarg).logits[:, -n:-1].float())
        lc, lr = logits
    lpc, lpr = torch.log_softmax(lc / temperature, -1), torch.log_softmax(lr / temperature, -1)
    kl = (lpc.exp() * (lpc - lpr)).sum(-1)
    return float(kl[keep].sum()), int(keep.sum())


def estimate_kl(
    candidate: str | Path,
    reference: str | Path,
    prompts: Sequence[Prompt],
    *,
    max_new_tokens: int = 32,
    temperature: float = 1.0,
    seed: int = 0,
    batch_size: int = 8,
    tools: Sequence[dict[str, Any]] | None = None,
    dtype: str = "float32",
) -> float:
    """Mean per-token KL(candidate || reference); prompts are chat message lists (rendered with `tools`,
    default the benchmark's TOOL_SPECS) or token-id lists. Both models load on the CPU in `dtype` (`model.dtype`);
    the KL is computed in fp32. Raises if the two models' vocabularies differ."""
    import torch

    from bat.policy.loader import load_model, load_tokenizer

    if not prompts:
        raise ValueError("estimate_kl needs at least one prompt")
    cand, ref = load_model(candidate, dtype=dtype), load_model(reference, dtype=dtype)
    if cand.config.vocab_size != ref.config.vocab_size:
        raise ValueError(
            f"vocabularies differ: candidate {cand.config.vocab_size} vs reference {ref.config.vocab_size}"
        )
    tokenizer = load_tokenizer(candidate)
    encoded = [_prompt_ids(tokenizer, p, tools) for p in prompts]
    torch.manual_seed(seed)
    total, count = 0.0, 0
    for start in range(0, len(encoded), batch_size):
        s, n = _kl_batch(cand, ref, tokenizer, encoded[start : start + batch_size], max_new_tokens, temperature)
        total, count = total + s, count + n
    return total / max(count, 1)
