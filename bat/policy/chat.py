"""ChatML-style chat template (system/user/assistant/tool roles, tool calls) and message encoding with loss masks.

`encode_messages` tokenizes context and target separately and concatenates the ids (token in,
token out): the model is trained on exactly the ids it will see when generating after the prompt.
"""

from __future__ import annotations

from typing import Any, Sequence

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
    "# Tools{{ nl }}Call exactly one tool per turn as <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>.{{ nl }}"
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
    "{% if call.arguments is string %}{\"name\": {{ call.name | tojson }}, \"arguments\": {{ call.arguments }}}"
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
        list(messages), tools=list(tools) if tools else None, tokenize=False, add_generation_prompt=add_generation_prompt
    )


def encode_text(tokenizer: Any, text: str) -> list[int]:
    """Token ids of `text` without any added BOS/EOS."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def encode_messages(
    tokenizer: Any, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None
) -> tuple[list[int], list[int]]:
    """Ids and loss mask for `messages` whose last message is the assistant target.

    Mask is 1 on the target's tokens up to and including its end-of-turn token, 0 on everything else.
    """
    if not messages or messages[-1].get("role") != "assistant":
        raise ValueError("the last message must be the assistant target (role 'assistant')")
    prompt = render_messages(tokenizer, messages[:-1], tools, add_generation_prompt=True)
    full = render_messages(tokenizer, messages, tools)
    if not full.startswith(prompt):
        raise ValueError("chat template does not render the context as a prefix of the full conversation")
    prompt_ids = encode_text(tokenizer, prompt)
    target_ids = encode_text(tokenizer, full[len(prompt) :])
    end_id = tokenizer.convert_tokens_to_ids(IM_END)
    cut = target_ids.index(end_id) + 1 if end_id in target_ids else len(target_ids)
    mask = [0] * len(prompt_ids) + [1] * cut + [0] * (len(target_ids) - cut)
    return prompt_ids + target_ids, mask


def encode_prompt(
    tokenizer: Any, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None
) -> list[int]:
    """Ids of `messages` followed by the assistant generation prompt (what a rollout starts from)."""
    return encode_text(tokenizer, render_messages(tokenizer, messages, tools, add_generation_prompt=True))
