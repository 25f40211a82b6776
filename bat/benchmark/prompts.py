"""Chat-form contexts shared by SFT rows and RL rows: system = agent preamble + stage skill(s), user = brief (+ hand-off).

Both sides use these builders so SFT teaches exactly the prompt shape the rollout later shows the policy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bat.schemas.bank import ChatMessage, TrajectoryTurn

PREAMBLE = (
    "You are a careful medical-imaging research agent working in a sandboxed workspace. "
    "Work through the public stages in order, call exactly one tool per turn, read each tool result "
    "before the next step, and never guess at files you have not inspected."
)


def skill_text(stage: str, skills: Mapping[str, str], stage_names: Mapping[str, str] | None = None) -> str:
    """kappa for one stage: `## Stage S3 (Validate)` + its public skill text; unknown stages raise."""
    if stage not in skills:
        raise KeyError(f"no stage skill for {stage!r}; stages with skills: {sorted(skills)}")
    name = (stage_names or {}).get(stage)
    title = f"## Stage {stage} ({name})" if name else f"## Stage {stage}"
    return f"{title}\n{skills[stage].strip()}"


def e2e_skill_text(
    order: Sequence[str], skills: Mapping[str, str], stage_names: Mapping[str, str] | None = None
) -> str:
    """kappa for an E2E row: the ordered skills of every stage (Eq. 14's attached (kappa_s))."""
    return "\n\n".join(skill_text(stage, skills, stage_names) for stage in order)


def system_message(skill: str, preamble: str = PREAMBLE) -> ChatMessage:
    """The system turn: preamble (default: the built-in benchmark's agent) + the attached skill."""
    return ChatMessage(role="system", content=f"{preamble}\n\n{skill}")


def user_message(brief: str, handoff: str = "") -> ChatMessage:
    """The user turn: task brief, plus the stage hand-off note for rows that start mid-workflow."""
    text = brief.strip()
    if handoff.strip():
        text = f"{text}\n\n## Where the work stands\n{handoff.strip()}"
    return ChatMessage(role="user", content=text)


def history_messages(turns: Sequence[TrajectoryTurn]) -> list[ChatMessage]:
    """Earlier teacher responses and their observations as alternating assistant/tool messages."""
    messages: list[ChatMessage] = []
    for turn in turns:
        messages.append(ChatMessage(role="assistant", content=turn.response))
        name = turn.call.get("name") if isinstance(turn.call, dict) else None
        messages.append(
            ChatMessage(role="tool", content=turn.observation, name=name if isinstance(name, str) else None)
        )
    return messages


def to_dicts(messages: Sequence[ChatMessage]) -> list[dict[str, str]]:
    """Messages as plain dicts for `tokenizer.apply_chat_template` (None names dropped)."""
    return [m.model_dump(exclude_none=True) for m in messages]
