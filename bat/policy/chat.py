"""ChatML-style chat template (system/user/assistant/tool roles, tool calls) and message encoding with loss masks.

`encode_messages` tokenizes context and target separately and concatenates the ids (token in,
token out): the model is trained on exactly the ids it will see when generating after the prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
ENDOFTEXT = "<|endoftext|>"
VALID_ROLES = ("system", "user", "assistant", "tool")

# Tool calls inside assistant messages accept both {"name","arguments"} and OpenAI's {"function": {...}}.
CHAT_TEMPLATE = (
    "{% set nl = '\\n' %}"
    "{% if tools %}"
    "<|im_start|>system{{ nl }}"
    "{% if messages and messages[0].role == 'system' %}{{ messages[0].content }}{{ nl }}{{ nl }}{% endif %}"
    '# Tools{{ nl }}Call exactly one tool per turn as <tool_call>{"name": ..., "arguments": {...}}</tool_call>.{{ nl }}'
    "<tools>{% for tool in tools %}{{ nl }}{{ tool | tojson }}{% endfor %}{{ nl }}</tools><|im_end|>{{ nl }}"
    "{% elif messages and messages[0].role == 'system' %}"
    "<|im_start|>system{{ nl }}{{ messages[0].content }}<|im_end|>{{ nl }}"
    "{% endif %}"
    "{% for message in messages %}"
    "{% if message.role == 'system' %}"
    "{% if not loop.first %}<|im_start|>system{{ nl }}{{ message.content }}<|im_end|>{{ nl }}{% endif %}"
    "{% elif message.role == 'assistant' %}"
    "<|im_start|>assistant{{ nl }}{{ message.content if message.content else '' }}"
    "{% if message.tool_calls %}{% for tc in message.tool_calls %}"
    "{% set call = tc.function if tc.function is defined else tc %}"
    "{% if (message.content and message.content | length > 0) or not loop.first %}{{ nl }}{% endif %}"
    "<tool_call>"
    '{% if call.arguments is string %}{"name": {{ call.name | tojson }}, "arguments": {{ call.arguments }}}'
    "{% else %}{{ {'name': call.name, 'arguments': call.arguments} | tojson }}{% endif %}"
    "</tool_call>"
    "{% endfor %}{% endif %}<|im_end|>{{ nl }}"
    "{% else %}"
    "<|im_start|>{{ message.role }}{{ nl }}{{ message.content }}<|im_end|>{{ nl }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant{{ nl }}{% endif %}"
)


def _check_messages(messages: Sequence[dict[str, Any]]) -> None:
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in VALID_ROLES:
            raise ValueError(f"message {index}: role {role!r} is not valid; valid roles: {list(VALID_ROLES)}")


def render_messages(
    tokenizer: Any,
    messages: Sequence[dict[str, Any]],
    tools: Sequence[dict[str, Any]] | None = None,
    add_generation_prompt: bool = False,
) -> str:
    """Render `messages` through the tokenizer's chat template; returns text (no tokenization)."""
    _check_messages(messages)
    return tokenizer.apply_chat_template(
        list(messages),
        tools=list(tools) if tools else None,
        tokenize=False,
        add_generation_prompt=add_generation_prompt,
    )


def encode_text(tokenizer: Any, text: str) -> list[int]:
    """Token ids of `text` without any added BOS/EOS."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


_MARK = "\u2063BAT-ASSISTANT-MARK\u2063"
PROBE_MESSAGES = [
    {"role": "system", "content": "s"},
    {"role": "user", "content": "u"},
    {"role": "assistant", "content": _MARK},
]
_PROBE_TOOL = {"name": "bat_probe_tool", "description": "probe", "parameters": {"type": "object", "properties": {}}}
_PROBE_CALL = {"name": "bat_probe_call", "arguments": {"bat_probe_argument": 1}}


class ChatTemplateError(ValueError):
    """A tokenizer's chat template cannot express what bat trains on (tool lists, tool calls)."""


def turn_close_text(tokenizer: Any, tools: Sequence[dict[str, Any]] | None = None) -> str:
    """What the template writes after an assistant message's content (e.g. `<|im_end|>\\n` for ChatML)."""
    base = render_messages(tokenizer, PROBE_MESSAGES, tools)
    return base[base.rindex(_MARK) + len(_MARK) :]


def check_chat_template(tokenizer: Any, where: str = "the tokenizer") -> None:
    """Raise ChatTemplateError unless the template renders a tool list and an assistant's tool call.

    A template that drops them would train and roll out on prompts without tools, silently."""
    messages = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "", "tool_calls": [_PROBE_CALL]}]
    try:
        text = render_messages(tokenizer, messages, [_PROBE_TOOL])
    except Exception as exc:  # jinja errors, a missing template
        raise ChatTemplateError(
            f"{where}: its chat template cannot render a conversation with tools "
            f"({type(exc).__name__}: {exc}); install bat's template with "
            f"`bat model install-template DIR`"
        ) from None
    missing = [
        what
        for what, needle in (
            ("the tool list", _PROBE_TOOL["name"]),
            ("tool calls", _PROBE_CALL["name"]),
            ("tool-call arguments", "bat_probe_argument"),
        )
        if needle not in text
    ]
    if missing:
        raise ChatTemplateError(
            f"{where}: its chat template drops {' and '.join(missing)}, so prompts would reach "
            f"the policy without them; install bat's template with "
            f"`bat model install-template DIR` (named pretrained models get it from "
            f"`bat model import`)"
        )


def encode_messages(
    tokenizer: Any, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None
) -> tuple[list[int], list[int]]:
    """Ids and loss mask for `messages` whose last message is the assistant target.

    Mask is 1 on the target's content and on the template's end-of-turn token (the first token of
    `turn_close_text`, which generation stops at), 0 on everything else; a close text that does not start
    with a special token is masked whole.
    """
    if not messages or messages[-1].get("role") != "assistant":
        raise ValueError("the last message must be the assistant target (role 'assistant')")
    prompt = render_messages(tokenizer, messages[:-1], tools, add_generation_prompt=True)
    full = render_messages(tokenizer, messages, tools)
    if not full.startswith(prompt):
        raise ValueError("chat template does not render the context as a prefix of the full conversation")
    prompt_ids = encode_text(tokenizer, prompt)
    target_ids = encode_text(tokenizer, full[len(prompt) :])
    cut = _target_cut(tokenizer, target_ids, turn_close_text(tokenizer, tools))
    mask = [0] * len(prompt_ids) + [1] * cut + [0] * (len(target_ids) - cut)
    return prompt_ids + target_ids, mask


def _target_cut(tokenizer: Any, target_ids: list[int], close_text: str) -> int:
    """Number of leading target ids that are trained: content + the end-of-turn token."""
    close_ids = encode_text(tokenizer, close_text)
    special = bool(close_ids) and close_ids[0] in set(tokenizer.all_special_ids)
    if close_ids and target_ids[-len(close_ids) :] == close_ids:
        return len(target_ids) - len(close_ids) + (1 if special else len(close_ids))
    if special and close_ids[0] in target_ids:
        return target_ids.index(close_ids[0]) + 1
    return len(target_ids)


def encode_prompt(
    tokenizer: Any, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None
) -> list[int]:
    """Ids of `messages` followed by the assistant generation prompt (what a rollout starts from)."""
    return encode_text(tokenizer, render_messages(tokenizer, messages, tools, add_generation_prompt=True))
