"""`hf` engine: transformers `generate` (KV cache, left-padded batches) with per-request seeded sampling.

Requests are left-padded into one `generate` per batch. With `prefix_cache=True` each rollout keeps its KV
cache between turns (keyed by `GenRequest.cache_key`) and the batch only prefills positions no row has cached
(see `bat.rollout.kvcache`); `set_weights` drops every cached prefix.

HF `generate` has one global RNG; to make each rollout's sampling depend only on its own seed (not on
which other rollouts share the batch) a logits processor samples every row with that row's own
`torch.Generator`, records log pi_behavior of the sampled token under the temperature, and hands
`generate` a one-hot score row so its greedy step picks exactly that token.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import torch
from transformers import GenerationConfig, LogitsProcessor, LogitsProcessorList, StoppingCriteria, StoppingCriteriaList

from bat.policy.loader import DTYPES, load_model
from bat.rollout import kvcache
from bat.rollout.engine import GenRequest, GenResult


def filter_logits(logits: torch.Tensor, top_p: float, top_k: int) -> torch.Tensor:
    """Mask (to -inf) logits outside top-k / the top-p nucleus; rows are independent."""
    if top_k > 0 and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
        cum = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
        drop = cum - torch.softmax(sorted_logits, dim=-1) > top_p
        logits = logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    return logits


class _RowSampler(LogitsProcessor):
    """Samples each row with its own generator; records the behavior logprob of the sampled token."""

    def __init__(self, seeds: list[int], temperatures: list[float], top_p: float, top_k: int) -> None:
        self.generators = [torch.Generator().manual_seed(int(s)) for s in seeds]
        self.temperatures = temperatures
        self.top_p, self.top_k = top_p, top_k
        self.chosen: list[list[int]] = [[] for _ in seeds]
        self.logprobs: list[list[float]] = [[] for _ in seeds]

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        scores = scores.float()
        out = torch.full_like(scores, float("-inf"))
        for row, gen in enumerate(self.generators):
            temp = self.temperatures[row]
            logits = scores[row] / temp if temp > 0 else scores[row]
            logp = torch.log_softmax(logits, dim=-1)
            if temp > 0:
                probs = torch.softmax(filter_logits(logits[None], self.top_p, self.top_k)[0], dim=-1)
                token = int(torch.multinomial(probs, 1, generator=gen).item())
            else:
                token = int(torch.argmax(logits).item())
            self.chosen[row].append(token)
            self.logprobs[row].append(float(logp[token].item()))
            out[row, token] = 0.0
        return out


class _RowLimits(StoppingCriteria):
    """Per-row stop: a row is finished at its own token limit or when it emits one of its stop ids."""

    def __init__(self, prompt_width: int, limits: list[int], stop_ids: list[set[int]]) -> None:
        self.prompt_width, self.limits, self.stop_ids = prompt_width, limits, stop_ids
        self.finished = [False] * len(limits)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs) -> torch.BoolTensor:
        produced = input_ids.shape[1] - self.prompt_width
        last = input_ids[:, -1].tolist()
        for row in range(len(self.limits)):
            if not self.finished[row] and (last[row] in self.stop_ids[row] or produced >= self.limits[row]):
                self.finished[row] = True
        return torch.tensor(self.finished, dtype=torch.bool, device=input_ids.device)


class HFEngine:
    """transformers engine; reads a local HF checkpoint (never a hub)."""

    name = "hf"

    def __init__(
        self,
        model_path: str | Path,
        *,
        dtype: str = "float32",
        device: str = "cpu",
        top_p: float = 1.0,
        top_k: int = 0,
        max_batch: int = 32,
        prefix_cache: bool = False,
    ) -> None:
        if dtype not in DTYPES:
            raise ValueError(f"unknown dtype {dtype!r}; valid: {sorted(DTYPES)}")
        self.dtype, self.device = dtype, device
        self.top_p, self.top_k, self.max_batch = top_p, top_k, max_batch
        self.prefix_cache = prefix_cache
        self._cache: dict[str, tuple[list[int], Any]] = {}
        self.model = None
        self.checkpoint = ""
        self.max_context: int | None = None
        """Positions the model can attend to (the rollout context budget is capped to it)."""
        self.set_weights(model_path)

    def set_weights(self, path: str | Path) -> None:
        """Load weights from a local HF directory (replaces the model; no KV survives the swap)."""
        path = Path(path)
        self._cache.clear()  # KV computed with the old weights is invalid
        self.model = load_model(path, dtype=self.dtype, device=self.device)  # a damaged folder: ModelFolderError
        cfg = self.model.config
        pad = cfg.pad_token_id if cfg.pad_token_id is not None else cfg.eos_token_id
        if isinstance(pad, list):
            pad = pad[0]
        self.pad_id = int(pad) if pad is not None else 0
        self.checkpoint = str(path)
        self.max_context = getattr(cfg, "max_position_embeddings", None)

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        """Sample every request; batches of at most `max_batch`, left-padded; order preserved."""
        results: list[GenResult] = []
        for start in range(0, len(requests), self.max_batch):
            results.extend(self._generate_batch(requests[start : start + self.max_batch]))
        return results

    @torch.inference_mode()
    def _generate_batch(self, requests: list[GenRequest]) -> list[GenResult]:
        """One left-padded `generate`; with the prefix cache, cached positions are not prefilled again."""
        if not requests:
            return []
        if any(not r.prompt_ids for r in requests):
            raise ValueError("every GenRequest needs at least one prompt token")
        width = max(len(r.prompt_ids) for r in requests)
        pads = [width - len(r.prompt_ids) for r in requests]
        ids = torch.full((len(requests), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(requests), width), dtype=torch.long)
        for row, req in enumerate(requests):
            ids[row, pads[row] :] = torch.tensor(req.prompt_ids, dtype=torch.long)
            mask[row, pads[row] :] = 1
        past, prefix = None, 0
        if self.prefix_cache:
            entries = [
                kvcache.usable(self._cache.pop(r.cache_key, None) if r.cache_key else None, r.prompt_ids)
                for r in requests
            ]
            prefix = kvcache.batch_prefix(entries, pads)
            past = kvcache.stack(entries, pads, prefix) if prefix > 0 else None
        limits = [max(1, r.max_new_tokens) for r in requests]
        sampler = _RowSampler([r.seed for r in requests], [r.temperature for r in requests], self.top_p, self.top_k)
        stops = _RowLimits(width, limits, [set(r.stop_ids) for r in requests])
        gen_cfg = GenerationConfig(
            max_new_tokens=max(limits),
            do_sample=False,
            use_cache=True,
            pad_token_id=self.pad_id,
            eos_token_id=None,
            return_dict_in_generate=True,
        )
        out = self.model.generate(
            input_ids=ids.to(self.device),
            attention_mask=mask.to(self.device),
            past_key_values=past,
            generation_config=gen_cfg,
            logits_processor=LogitsProcessorList([sampler]),
            stopping_criteria=StoppingCriteriaList([stops]),
        )
        results = [
            self._cut(sampler.chosen[row], sampler.logprobs[row], limits[row], set(req.stop_ids))
            for row, req in enumerate(requests)
        ]
        if self.prefix_cache:
            total = out.past_key_values.get_seq_length()
            for row, (req, res) in enumerate(zip(requests, results)):
                if req.cache_key:
                    seq = list(req.prompt_ids) + res.token_ids
                    keep = min(total - pads[row], len(seq) - 1)
                    self._cache[req.cache_key] = (seq[:keep], kvcache.split(out.past_key_values, row, pads[row], keep))
        return results

    def release(self, cache_key: str) -> None:
        """Drop the cached KV of a finished rollout."""
        self._cache.pop(cache_key, None)

    @staticmethod
    def _cut(tokens: list[int], logps: list[float], limit: int, stop_ids: set[int]) -> GenResult:
        finish: Literal["stop", "length"] = "length"
        end = min(limit, len(tokens))
        for i, tok in enumerate(tokens[:end]):
            if tok in stop_ids:
                end, finish = i + 1, "stop"
                break
        return GenResult(token_ids=tokens[:end], logprobs=logps[:end], finish=finish)

    def close(self) -> None:
        """Drop the model and every cached prefix."""
        self.model = None
        self._cache.clear()
