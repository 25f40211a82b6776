"""Test doubles for rollout tests (named as such): `ScriptedEngine` (an engine replaying fixed response
texts through the real tokenizer, so budget and codec paths can be driven exactly) and `ToyEnv` (a stand-in
for the benchmark env answering tool calls with fixed observations and writing files into a real workspace).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bat.rollout.engine import GenRequest, GenResult


@dataclass
class Obs:
    text: str
    record: dict[str, Any]
    done: bool = False


@dataclass
class ToyEnv:
    """Test double of the benchmark env: `write` writes a file, `submit` ends, `big` returns 5000 chars."""

    workspace: Path
    calls: list[dict[str, Any]] = field(default_factory=list)

    def reset(self) -> str:
        self.workspace.mkdir(parents=True, exist_ok=True)
        (self.workspace / "README.md").write_text("task brief\n")
        return "Solve the toy task. Call submit when done."

    def step(self, call: dict[str, Any]) -> Obs:
        self.calls.append(call)
        if call.get("invalid"):
            return Obs(f"error: invalid action ({call['reason']})", {"tool": None, "ok": False, "duration_s": 0.01})
        name, args = call["name"], call.get("arguments", {})
        if name == "write":
            (self.workspace / args["path"]).write_text(args.get("text", ""))
            return Obs(f"wrote {args['path']}", {"tool": name, "ok": True, "duration_s": 0.02})
        if name == "big":
            return Obs("x" * 5000, {"tool": name, "ok": True})
        if name == "submit":
            return Obs("submitted", {"tool": name, "ok": True}, done=True)
        return Obs(f"ok {name}", {"tool": name, "ok": True})


class ScriptedEngine:
    """Test double of an engine: rollout i replays `scripts[prompt-prefix -> list of texts]` turn by turn."""

    name = "scripted"
    checkpoint = "scripted"

    def __init__(self, tokenizer, scripts: dict[int, list[str]], end_id: int) -> None:
        self.tok, self.scripts, self.end_id = tokenizer, scripts, end_id
        self.turn: dict[int, int] = {}
        self.calls = 0

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        self.calls += 1
        out = []
        for req in requests:
            key = req.seed_key if hasattr(req, "seed_key") else self._key(req)
            texts = self.scripts[key]
            t = self.turn.get(key, 0)
            self.turn[key] = t + 1
            ids = self.tok(texts[min(t, len(texts) - 1)], add_special_tokens=False)["input_ids"] + [self.end_id]
            finish = "stop"
            if len(ids) > req.max_new_tokens:
                ids, finish = ids[: req.max_new_tokens], "length"
            out.append(GenResult(token_ids=ids, logprobs=[-0.5] * len(ids), finish=finish))
        return out

    def _key(self, req: GenRequest) -> int:
        # the first prompt token after the template header encodes which rollout this is: see make_messages
        text = self.tok.decode(req.prompt_ids)
        return int(text.split("ROLLOUT-")[1].split(" ")[0])

    def set_weights(self, path) -> None:
        self.checkpoint = str(path)

    def close(self) -> None:
        pass


def make_messages(i: int) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "You are a test agent."},
        {"role": "user", "content": f"ROLLOUT-{i} solve the toy task"},
    ]
