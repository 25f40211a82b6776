"""Token pieces of a multi-turn conversation, rendered once from the chat template and then only appended.

The history is never re-rendered: the prompt is tokenized once, generated ids are kept as sampled, and
each observation is turned into ids by rendering only the *delta* the template adds for a tool message
(plus the next assistant header) against a fixed probe conversation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bat.policy.chat import PROBE_MESSAGES, encode_text, render_messages, turn_close_text


class TurnTokens:
    """Template-derived token pieces for one tokenizer: prompt, end-of-turn, observation deltas."""

    def __init__(self, tokenizer: Any, tools: Sequence[dict[str, Any]] | None = None) -> None:
        self.tokenizer = tokenizer
        self.tools = list(tools) if tools else None
        self._base = render_messages(tokenizer, PROBE_MESSAGES, self.tools)
        self.close_text = turn_close_text(tokenizer, self.tools)
        """What the template writes after an assistant message's content (e.g. `<|im_end|>\\n`)."""
        close_ids = encode_text(tokenizer, self.close_text)
        stops = {int(i) for i in ([tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else [])}
        if close_ids and close_ids[0] in set(tokenizer.all_special_ids):
            stops.add(int(close_ids[0]))
        if not stops:
            raise ValueError(
                "tokenizer has no eos token and its chat template closes assistant turns "
                f"with {self.close_text!r}, which does not start with a special token"
            )
        self.stop_ids = tuple(sorted(stops))
        """Token ids that end an assistant turn (the template's end-of-turn token and eos)."""

    def prompt_ids(self, messages: Sequence[dict[str, Any]]) -> list[int]:
        """Ids of the opening messages (system/user) followed by the assistant generation prompt."""
        return encode_text(self.tokenizer, render_messages(self.tokenizer, messages, self.tools, True))

    def _observation_text(self, text: str, name: str | None) -> str:
        message: dict[str, Any] = {"role": "tool", "content": text}
        if name:
            message["name"] = name
        full = render_messages(self.tokenizer, [*PROBE_MESSAGES, message], self.tools, add_generation_prompt=True)
        if not full.startswith(self._base):
            raise ValueError(
                "chat template re-renders earlier messages when a tool message is added; "
                "token-in/token-out rollouts need an append-only template"
            )
        return full[len(self._base) :]

    def continuation_ids(self, generated: Sequence[int], observation: str, name: str | None = None) -> list[int]:
        """Ids appended after a generated turn: the rest of the turn close, the tool message, the next header."""
        close = self.close_text
        if generated and generated[-1] in self.stop_ids:
            stop_text = self.tokenizer.decode([generated[-1]])
            close = close[len(stop_text) :] if close.startswith(stop_text) else ""
        return encode_text(self.tokenizer, close + self._observation_text(observation, name))

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids` with special tokens kept (what the policy wrote)."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)
