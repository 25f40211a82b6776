"""Multi-turn budgets enforced in code: each check returns the `end_reason` that ends the rollout, or None."""

from __future__ import annotations

from dataclasses import dataclass

from bat.config.rollout import RolloutBudgets


@dataclass
class BudgetUse:
    """What one rollout has used so far."""

    turns: int = 0
    tool_calls: int = 0
    response_tokens: int = 0


def before_turn(b: RolloutBudgets, use: BudgetUse, context_tokens: int) -> str | None:
    """Reason to stop before generating another assistant turn (turns, response tokens, context)."""
    if use.turns >= b.max_assistant_turns:
        return "max_turns"
    if use.response_tokens >= b.max_response_tokens:
        return "max_response_tokens"
    if context_tokens >= b.max_context_tokens:
        return "context_length"
    return None


def turn_token_limit(b: RolloutBudgets, use: BudgetUse, context_tokens: int) -> int:
    """Most tokens the next turn may generate (per-turn cap, remaining response budget, remaining context)."""
    return max(
        0,
        min(
            b.max_new_tokens_per_turn,
            b.max_response_tokens - use.response_tokens,
            b.max_context_tokens - context_tokens,
        ),
    )


def after_cut_turn(b: RolloutBudgets, use: BudgetUse, context_tokens: int) -> str | None:
    """Reason to stop right after a turn that was cut by length: the budget that cut it, if exhausted."""
    if use.response_tokens >= b.max_response_tokens:
        return "max_response_tokens"
    if context_tokens >= b.max_context_tokens:
        return "context_length"
    return None


def calls_left(b: RolloutBudgets, use: BudgetUse) -> int:
    """The most environment calls that can still follow: each needs an assistant turn and an action."""
    return max(0, min(b.max_tool_calls - use.tool_calls, b.max_assistant_turns - use.turns))


def before_action(b: RolloutBudgets, use: BudgetUse) -> str | None:
    """Reason to stop instead of sending another action to the environment."""
    return "max_tool_calls" if use.tool_calls >= b.max_tool_calls else None


_MARKER = "\n[... truncated {n} characters]"


def cap_observation(b: RolloutBudgets, text: str) -> tuple[str, bool, str | None]:
    """(text shown to the policy, truncated?, end_reason) for one tool result under the character cap."""
    limit = b.max_observation_chars
    if len(text) <= limit:
        return text, False, None
    if b.observation_overflow == "end":
        return text[:limit], True, "max_observation_chars"
    marker = _MARKER.format(n=len(text) - limit)
    keep = max(0, limit - len(marker))
    return (text[:keep] + marker)[:limit], True, None
