"""Check that a served policy is the checkpoint bat means: a fixed probe continuation, scored both ways.

The server samples a few tokens after a fixed probe prompt (fixed seed, temperature 1) and reports each sampled
token's log-prob; the checkpoint, loaded here with transformers, scores the same tokens. If the largest
difference exceeds the tolerance, the server is serving other weights, and the rollout or evaluation is refused
before any record is written that names a checkpoint it was not made with. Checkpoints whose log-probs differ by
less than the tolerance (e.g. two very close training steps) cannot be told apart this way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bat.rollout.engine import GenRequest

PROBE_PROMPT = "<|im_start|>user\nList the files of the task workspace.<|im_end|>\n<|im_start|>assistant\n"
"""Text of the probe prompt (tokenized with the checkpoint's own tokenizer)."""
PROBE_TOKENS = 8
PROBE_SEED = 20261202


class ServedModelMismatch(RuntimeError):
    """The server's log-probs on the probe do not match the checkpoint's."""


def default_tolerance(dtype: str) -> float:
    """Largest probe log-prob difference accepted: tight in fp32, looser in 16-bit formats."""
    return 2e-3 if dtype == "float32" else 5e-2


def probe_request(checkpoint: str | Path) -> GenRequest:
    """The probe: fixed prompt ids from the checkpoint's tokenizer, fixed seed, temperature 1, no stop ids."""
    from bat.policy.loader import load_tokenizer

    ids = load_tokenizer(checkpoint, check_template=False)(PROBE_PROMPT, add_special_tokens=False)["input_ids"]
    return GenRequest(
        prompt_ids=[int(i) for i in ids], max_new_tokens=PROBE_TOKENS, seed=PROBE_SEED, temperature=1.0, stop_ids=()
    )


def local_logprobs(
    checkpoint: str | Path, prompt: list[int], tokens: list[int], *, dtype: str = "float32", device: str = "cpu"
) -> list[float]:
    """log p(token) of each of `tokens` after `prompt` under the checkpoint's weights (temperature 1)."""
    import torch

    from bat.policy.loader import load_model

    model = load_model(checkpoint, dtype=dtype, device=device)
    with torch.inference_mode():
        logits = model(torch.tensor([prompt + tokens], device=device)).logits[0].float()
    logp = torch.log_softmax(logits, dim=-1)
    return [float(logp[len(prompt) - 1 + j, tok]) for j, tok in enumerate(tokens)]


def check_served(
    engine: Any, checkpoint: str | Path, *, where: str, tolerance: float, dtype: str = "float32", device: str = "cpu"
) -> float:
    """Probe `engine` (anything with `generate`) and compare with `checkpoint`; returns the largest difference,
    raises ServedModelMismatch naming `where` (the server) and the checkpoint when it exceeds `tolerance`."""
    req = probe_request(checkpoint)
    res = engine.generate([req])[0]
    if res.error or not res.token_ids:
        raise ServedModelMismatch(
            f"{where}: the probe request failed ({res.error or 'no tokens'}); cannot check that it serves {checkpoint}"
        )
    ref = local_logprobs(checkpoint, req.prompt_ids, res.token_ids, dtype=dtype, device=device)
    diff = max(abs(a - b) for a, b in zip(ref, res.logprobs))
    if diff > tolerance:
        raise ServedModelMismatch(
            f"{where} does not serve the checkpoint {checkpoint}: its log-probs on a fixed probe differ from the "
            f"checkpoint's by up to {diff:.3g} (tolerance {tolerance:g}); load {checkpoint} into the server (or point "
            f"the config at the checkpoint it serves) and rerun"
        )
    return diff
