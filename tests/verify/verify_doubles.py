"""Test double (named as such): `ReplayEngine` replays fixed assistant texts per rollout (key `ROLLOUT-<k>` in the
prompt) through the real tokenizer, so a scripted benchmark agent can drive the real rollout loop and env."""

from __future__ import annotations

from bat.rollout.engine import GenRequest, GenResult


class ReplayEngine:
    name = "replay"
    checkpoint = "replay"

    def __init__(self, tokenizer, scripts: dict[int, list[str]], end_id: int) -> None:
        self.tok, self.scripts, self.end_id, self.turn = tokenizer, scripts, end_id, {}

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        out = []
        for req in requests:
            key = int(self.tok.decode(req.prompt_ids).split("ROLLOUT-")[1].split(" ")[0])
            t = self.turn.get(key, 0)
            self.turn[key] = t + 1
            texts = self.scripts[key]
            ids = self.tok(texts[min(t, len(texts) - 1)], add_special_tokens=False)["input_ids"] + [self.end_id]
            out.append(
                GenResult(
                    token_ids=ids[: req.max_new_tokens],
                    logprobs=[-1.0] * min(len(ids), req.max_new_tokens),
                    finish="stop" if len(ids) <= req.max_new_tokens else "length",
                )
            )
        return out

    def set_weights(self, path) -> None:
        pass

    def close(self) -> None:
        pass
