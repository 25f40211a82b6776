"""The expert's reference score on the stage probe: an engine that answers each probe rollout with the rest of the
expert trajectory its state was replayed from, through the real tokenizer, agent loop, environment, stage exit and
verifier. What it scores is the most the probe's scoring path credits on these states (a scoring bug that pays
nothing shows up as a low expert score).

Reads the probe's trajectories (held-out side) and a tokenizer; writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bat.rollout.engine import GenRequest, GenResult

EXPERT_CHECKPOINT = "scripted:expert"
"""What a probe score of the expert names as its checkpoint."""


class ExpertReplayEngine:
    """An engine whose rollout `cache_key` (the rollout id) selects the expert turns it plays, one per request; once
    they run out it answers with the stop token alone (a turn without a tool call, which ends the rollout)."""

    name = "expert-replay"
    checkpoint = EXPERT_CHECKPOINT

    def __init__(self, tokenizer: Any, scripts: Mapping[str, Sequence[str]], stop_id: int) -> None:
        self.tokenizer, self.scripts, self.stop_id = tokenizer, dict(scripts), int(stop_id)
        self.turns: dict[str, int] = {}

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        """The next expert turn of every request's rollout, cut at the request's token limit like a sampled one."""
        out = []
        for req in requests:
            key = req.cache_key or ""
            if key not in self.scripts:
                raise KeyError(f"no expert script for rollout {key!r}; scripted rollouts: {sorted(self.scripts)[:5]}")
            t = self.turns.get(key, 0)
            self.turns[key] = t + 1
            script = self.scripts[key]
            text = script[t] if t < len(script) else ""
            ids = [*self.tokenizer(text, add_special_tokens=False)["input_ids"], self.stop_id]
            cut = ids[: req.max_new_tokens]
            out.append(GenResult(token_ids=cut, logprobs=[0.0] * len(cut), finish="stop" if cut == ids else "length"))
        return out

    def set_weights(self, path: Any) -> None:
        return None

    def release(self, cache_key: str) -> None:
        self.turns.pop(cache_key, None)

    def close(self) -> None:
        return None


def score_checkpoint(config: Any, layout: Any, checkpoint: str | Path, label: str, *, config_hash: str = "") -> Any:
    """Score the HF checkpoint at `checkpoint` on the run's probe with the rollout engine of `rollout.engine`."""
    from bat.evaluate.manifest import checkpoint_digest
    from bat.evaluate.stage_probe_score import score_probe
    from bat.policy.loader import load_tokenizer
    from bat.policy.tools import policy_tools
    from bat.rollout.chat import TurnTokens
    from bat.rollout.engines import make_engine

    path = str(Path(checkpoint).resolve())
    return score_probe(
        config,
        layout,
        label=label,
        checkpoint=path,
        checkpoint_digest=checkpoint_digest(path),
        engine_factory=lambda: make_engine(config.rollout, path),
        turn_tokens=lambda: TurnTokens(
            load_tokenizer(path), policy_tools(config.sft.render_tools, config.sft.tool_format)
        ),
        config_hash=config_hash,
    )


def score_expert(config: Any, layout: Any, label: str, tokenizer_dir: str | Path, *, config_hash: str = "") -> Any:
    """Score the expert's own continuation of every probe state (`ExpertReplayEngine`), written in the tokens of the
    tokenizer at `tokenizer_dir` (the policy's, so budgets count the same tokens)."""
    from bat.evaluate.stage_probe_score import load_probe, score_probe
    from bat.policy.loader import load_tokenizer
    from bat.policy.tools import policy_tools
    from bat.rollout.chat import TurnTokens

    tokens = TurnTokens(load_tokenizer(tokenizer_dir), policy_tools(config.sft.render_tools, config.sft.tool_format))
    scripts = load_probe(layout).scripts(config.evaluate.stage_probe.k)
    return score_probe(
        config,
        layout,
        label=label,
        checkpoint=EXPERT_CHECKPOINT,
        checkpoint_digest=EXPERT_CHECKPOINT,
        engine_factory=lambda: ExpertReplayEngine(tokens.tokenizer, scripts, tokens.stop_ids[0]),
        turn_tokens=lambda: tokens,
        config_hash=config_hash,
    )
