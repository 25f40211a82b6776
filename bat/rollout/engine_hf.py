"""`hf` engine: a transformers model decoding left-padded batches over a KV cache, with per-request seeded sampling.

Requests are left-padded into one batch; a request that emits a stop id or reaches its limit leaves the batch (its
KV rows are dropped), so later decode steps compute only the requests still generating; requests with the same
prompt (the K rollouts of a state, on their first turn) prefill it once and copy its KV, and requests whose prompts
open alike (one system prompt and tool list before each task) prefill that shared prefix once. With `prefix_cache=True`
each rollout keeps its KV cache between turns (keyed by `GenRequest.cache_key`) and the batch only prefills positions no row has cached
(see `bat.rollout.kvcache`); `set_weights` drops every cached prefix.

Each request samples with its own `torch.Generator`, so its tokens depend only on its own seed (not on which other
requests share the batch); the log pi_behavior of each sampled token under the temperature is recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import torch

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


class _RowSampler:
    """Samples each request with its own generator; records the behavior logprob of the sampled token."""

    def __init__(self, seeds: list[int], temperatures: list[float], top_p: float, top_k: int) -> None:
        self.generators = [torch.Generator().manual_seed(int(s)) for s in seeds]
        self.temperatures = temperatures
        self.top_p, self.top_k = top_p, top_k
        self.chosen: list[list[int]] = [[] for _ in seeds]
        self.logprobs: list[list[float]] = [[] for _ in seeds]

    def step(self, requests: list[int], scores: torch.Tensor) -> list[int]:
        """One token for each live batch row; `requests[b]` is the request index of batch row `b`."""
        scores = scores.float()
        tokens = []
        for row, index in enumerate(requests):
            temp = self.temperatures[index]
            logits = scores[row] / temp if temp > 0 else scores[row]
            logp = torch.log_softmax(logits, dim=-1)
            if temp > 0:
                probs = torch.softmax(filter_logits(logits[None], self.top_p, self.top_k)[0], dim=-1)
                token = int(torch.multinomial(probs, 1, generator=self.generators[index]).item())
            else:
                token = int(torch.argmax(logits).item())
            self.chosen[index].append(token)
            self.logprobs[index].append(float(logp[token].item()))
            tokens.append(token)
        return tokens


MIN_SHARED_PREFIX = 32
"""Prompts sharing at least this many leading tokens prefill them once (shorter shares are not worth a copy)."""


def shared_prefix_length(requests: list[GenRequest]) -> int:
    """Leading tokens every prompt shares, leaving each prompt at least one token of its own to feed."""
    first = requests[0].prompt_ids
    length = min(len(r.prompt_ids) for r in requests) - 1
    for r in requests[1:]:
        ids = r.prompt_ids
        same = 0
        while same < length and ids[same] == first[same]:
            same += 1
        length = same
    return max(0, length)


def _first_of_each_prompt(requests: list[GenRequest]) -> list[int] | None:
    """For each request, the first request with the same prompt ids; None when every prompt differs."""
    first: dict[tuple[int, ...], int] = {}
    source = [first.setdefault(tuple(r.prompt_ids), row) for row, r in enumerate(requests)]
    return source if len(first) < len(requests) else None


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
        self._adopt(str(path))

    def share_model(self, model: Any, label: str) -> None:
        """Generate from `model`, an already loaded module (e.g. the weights a trainer is updating in this process),
        without a copy; `label` is recorded as the checkpoint. Every cached prefix is dropped (it was computed with
        other weights). The caller keeps the module in eval mode while it generates."""
        self._cache.clear()
        self.model = model
        self._adopt(label)

    def _adopt(self, checkpoint: str) -> None:
        """Read the pad id and context length of the model just installed; record `checkpoint`."""
        cfg = self.model.config
        pad = cfg.pad_token_id if cfg.pad_token_id is not None else cfg.eos_token_id
        if isinstance(pad, list):
            pad = pad[0]
        self.pad_id = int(pad) if pad is not None else 0
        self.checkpoint = checkpoint
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
        limits = [max(1, r.max_new_tokens) for r in requests]
        past, prefix = None, 0
        if self.prefix_cache:
            entries = [
                kvcache.usable(self._cache.pop(r.cache_key, None) if r.cache_key else None, r.prompt_ids)
                for r in requests
            ]
            prefix = kvcache.batch_prefix(entries, pads)
            if prefix > 0:
                past = kvcache.stack(entries, pads, prefix, reserve=width - prefix + max(limits))
        if past is None and len(requests) > 1 and (shared := shared_prefix_length(requests)) >= MIN_SHARED_PREFIX:
            prefix = min(pads) + shared
            past = self._prefill_shared(requests[0].prompt_ids[:shared], pads, prefix, width - prefix + max(limits))
        if past is None:
            past = kvcache.ReservedCache(self.model.config.num_hidden_layers, reserve=max(limits))
        sampler = _RowSampler([r.seed for r in requests], [r.temperature for r in requests], self.top_p, self.top_k)
        stops = [set(r.stop_ids) for r in requests]
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        live = list(range(len(requests)))  # request index of each batch row still generating
        feed, feed_pos, attn = ids[:, prefix:], positions[:, prefix:], mask
        source = _first_of_each_prompt(requests)
        while live:
            if source is not None:  # requests with one prompt (a GRPO group's first turn): prefill it once
                rows = sorted(set(source))
                picked = torch.tensor(rows, dtype=torch.long)
                past.batch_select_indices(picked.to(self.device))  # rows of one prompt hold one cached prefix
                logits = self._forward(feed[picked], attn[picked], feed_pos[picked], past)
                copies = torch.tensor([rows.index(s) for s in source], dtype=torch.long)
                past.batch_select_indices(copies.to(self.device))
                logits, source = logits[copies.to(logits.device)], None
            else:
                logits = self._forward(feed, attn, feed_pos, past)
            tokens = sampler.step(live, logits)
            ended = [
                row
                for row, (index, token) in enumerate(zip(live, tokens))
                if token in stops[index] or len(sampler.chosen[index]) >= limits[index]
            ]
            for row in ended:
                self._keep_prefix(requests[live[row]], sampler.chosen[live[row]], past, row, pads[live[row]])
            going = [row for row in range(len(live)) if row not in set(ended)]
            if not going:
                break
            last_pos = feed_pos[:, -1:]
            if ended:  # finished rows leave the batch: later steps compute only the rows still going
                keep = torch.tensor(going, dtype=torch.long)
                past.batch_select_indices(keep.to(self.device))
                attn, last_pos = attn[keep], last_pos[keep]
            live = [live[row] for row in going]
            feed = torch.tensor([[tokens[row]] for row in going], dtype=torch.long)
            feed_pos = last_pos + 1
            attn = torch.cat([attn, torch.ones((len(live), 1), dtype=attn.dtype)], dim=1)
        return [
            self._cut(sampler.chosen[row], sampler.logprobs[row], limits[row], stops[row])
            for row in range(len(requests))
        ]

    def _prefill_shared(self, shared: list[int], pads: list[int], length: int, reserve: int) -> Any:
        """Prefill `shared` (the leading tokens of every prompt) once and lay it out as a batch cache of `length`
        positions for rows left-padded by `pads` (rows padded beyond the least padded one keep fewer of the shared
        positions and prefill the rest with their own tokens)."""
        one = kvcache.ReservedCache(self.model.config.num_hidden_layers, reserve=0)
        n = len(shared)
        self._forward(
            torch.tensor([shared], dtype=torch.long),
            torch.ones((1, n), dtype=torch.long),
            torch.arange(n, dtype=torch.long)[None],
            one,
        )
        entries = [(shared, one)] * len(pads)
        return kvcache.stack(entries, pads, length, reserve=reserve)

    def _forward(self, ids: torch.Tensor, attn: torch.Tensor, positions: torch.Tensor, past: Any) -> torch.Tensor:
        """Feed `ids` (`[B, n]`) through the model onto `past` (extended in place); the last position's logits."""
        out = self.model(
            input_ids=ids.to(self.device),
            attention_mask=attn.to(self.device),
            position_ids=positions.to(self.device),
            past_key_values=past,
            use_cache=True,
            logits_to_keep=1,
        )
        return out.logits[:, -1, :]

    def _keep_prefix(self, request: GenRequest, chosen: list[int], past: Any, row: int, pad: int) -> None:
        """With the prefix cache, store batch row `row`'s KV (its context and every sampled token but the last,
        which was never fed) under the request's cache key."""
        if not (self.prefix_cache and request.cache_key):
            return
        seq = list(request.prompt_ids) + chosen
        keep = min(past.get_seq_length() - pad, len(seq) - 1)
        self._cache[request.cache_key] = (seq[:keep], kvcache.split(past, row, pad, keep))

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
