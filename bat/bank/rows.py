"""Build RL rows z = (p, s, c, G, kappa, m) from a packed state, and open an environment on a stored row.

The stored prompt holds only system/user text: stage skill(s), the task brief and a hand-off note made of upstream
*observations* (which stages are done, the workspace listing, the last tool result) — never an assistant turn.
`history_opening` shows a stage row the way the SFT slices show a mid-workflow turn instead: the teacher prefix the
state was built from as assistant/tool messages (`rollout.state_context: history`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.bank.states import materialize, prefixed
from bat.benchmark import prompts
from bat.schemas.bank import (
    E2E,
    BankRow,
    ChatMessage,
    EvidenceRef,
    PracticeTask,
    Provenance,
    RubricItemRef,
    StateRef,
    Trajectory,
    TrajectoryTurn,
)

if TYPE_CHECKING:
    from bat.config.contract import ContractConfig
    from bat.config.root import BatConfig

GENERATOR = "bat.bank"
GENERATOR_VERSION = "1"


def contract_refs(
    stages: Sequence[str], track: str, contract: ContractConfig | None = None
) -> tuple[list[RubricItemRef], list[EvidenceRef]]:
    """c and G of the given stages (for E2E the union over every stage, Eq. 14) from the configured benchmark
    contract (`benchmark.contract`; default: the built-in one)."""
    from bat.benchmark import evidence_requirements, rubric

    items = [RubricItemRef(id=i.id, stage=i.stage, text=i.text) for s in stages for i in rubric(s, track, contract)]
    evidence = [
        EvidenceRef(id=e.id, stage=e.stage, text=e.text) for s in stages for e in evidence_requirements(s, contract)
    ]
    return items, evidence


def handoff_note(
    stage: str, order: Sequence[str], prefix: Sequence[TrajectoryTurn], files: Sequence[str], limit: int
) -> str:
    """Where the work stands at the start of `stage`: done stages, workspace files, the last tool result."""
    done = list(order[: list(order).index(stage)]) if stage in order else []
    lines = [f"You start at stage {stage}. Earlier stages ran already: {', '.join(done) if done else 'none'}."]
    visible = [f for f in files if not f.startswith(".") and not f.endswith("/")]
    lines.append("Workspace files: " + ", ".join(visible[:60]) + (" ..." if len(visible) > 60 else ""))
    if prefix:
        last = prefix[-1]
        name = last.call.get("name") if isinstance(last.call, dict) else "an invalid call"
        text = (
            last.observation if len(last.observation) <= limit else last.observation[: limit - 15] + "\n...[truncated]"
        )
        lines.append(f"Last tool result ({name}):\n{text}")
    lines.append(f"Do the work of stage {stage} now.")
    return "\n".join(lines)


def agent_skill(config: BatConfig) -> str:
    """kappa of an E2E row and of the agent's own opening: every configured stage's skill text, in order."""
    from bat.bank.skills import stage_skills

    return prompts.e2e_skill_text(
        [s.key for s in config.stages], stage_skills(config), {s.key: s.name for s in config.stages}
    )


def history_opening(
    row: BankRow,
    trajectory: Trajectory,
    config: BatConfig,
    *,
    agent_text: str | None = None,
    preamble: str = prompts.PREAMBLE,
) -> list[ChatMessage]:
    """The opening of a stage row in the layout the SFT slices train on (the paper's "upstream context", Eq. 11):
    system turn (`preamble` + every stage skill when `bank.sft_context` is `agent`, else the row's skill kappa_s),
    the task brief, then the first `provenance.prefix_turns` turns of `trajectory` (the teacher prefix the state
    package was replayed from) as assistant/tool messages. An E2E row or a row without a prefix opens with its own
    prompt. `agent_text` is every stage's skill (default: the built-in benchmark's, `agent_skill`). Reads only bank
    content; raises ValueError when `trajectory` is not the row's."""
    if row.stage == E2E or row.provenance.prefix_turns == 0:
        return list(row.prompt)
    if trajectory.trajectory_id != row.provenance.trajectory_id:
        raise ValueError(
            f"row {row.state_id} was built from trajectory {row.provenance.trajectory_id}, "
            f"not {trajectory.trajectory_id}"
        )
    prefix = trajectory.turns[: row.provenance.prefix_turns]
    if config.bank.sft_context == "agent":
        skill = agent_skill(config) if agent_text is None else agent_text
    else:
        skill = row.skill
    return [
        prompts.system_message(skill, preamble),
        prompts.user_message(trajectory.brief),
        *prompts.history_messages(prefix),
    ]


def build_row(
    *,
    state_id: str,
    stage: str,
    outcome: str,
    task: PracticeTask,
    brief: str,
    manifest: Any,
    prefix: Sequence[TrajectoryTurn],
    trajectory_id: str,
    teacher: str,
    seeds: dict[str, int],
    config: BatConfig,
) -> BankRow:
    """Assemble one RL row of the built-in benchmark for a state packed at `states/<state_id>` (manifest from the
    sandbox package); kappa is the stage's text from `bat.bank.skills.stage_skills(config)` (static, or the
    version's `bank.skills`)."""
    from bat.bank.skills import stage_skills

    order = [s.key for s in config.stages]
    names = {s.key: s.name for s in config.stages}
    skills = stage_skills(config)
    if stage == E2E:
        skill = agent_skill(config)
        items, evidence = contract_refs(order, task.track, config.benchmark.contract)
        user = prompts.user_message(brief)
    else:
        skill = prompts.skill_text(stage, skills, names)
        items, evidence = contract_refs([stage], task.track, config.benchmark.contract)
        files = [f.path for f in manifest.files]
        user = prompts.user_message(
            brief, handoff_note(stage, order, prefix, files, config.benchmark.max_observation_chars)
        )
    return assemble_row(
        state_id=state_id,
        stage=stage,
        outcome=outcome,
        task=task,
        manifest=manifest,
        prefix_turns=len(prefix),
        trajectory_id=trajectory_id,
        teacher=teacher,
        seeds=seeds,
        prompt=[prompts.system_message(skill), user],
        skill=skill,
        rubric=items,
        evidence=evidence,
    )


def assemble_row(
    *,
    state_id: str,
    stage: str,
    outcome: str,
    task: PracticeTask,
    manifest: Any,
    prefix_turns: int,
    trajectory_id: str,
    teacher: str,
    seeds: dict[str, int],
    prompt: list[ChatMessage],
    skill: str,
    rubric: list[RubricItemRef],
    evidence: list[EvidenceRef],
) -> BankRow:
    """The `BankRow` of a state packed at `states/<state_id>` (state ref and digests from its package `manifest`)
    with the given prompt, skill kappa, rubric c and evidence G (any benchmark)."""
    return BankRow(
        state_id=state_id,
        stage=stage,
        track=task.track,
        outcome=outcome,  # type: ignore[arg-type]
        reward_source="e2e_rubric_task" if stage == E2E else "stage_rubric",
        task=task,
        state=StateRef(
            path=f"states/{state_id}",
            digest=prefixed(manifest.digest),
            files=sum(1 for f in manifest.files if not f.path.endswith("/")),
            bytes=sum(f.size for f in manifest.files),
        ),
        prompt=prompt,
        rubric=rubric,
        evidence=evidence,
        skill=skill,
        provenance=Provenance(
            source=f"practice:{task.track}",
            generator=GENERATOR,
            generator_version=GENERATOR_VERSION,
            teacher=teacher,
            seeds=seeds,
            reduction=task.reduction,
            trajectory_id=trajectory_id,
            prefix_turns=prefix_turns,
            digests={"state": prefixed(manifest.digest)},
        ),
    )


def open_row_env(bank_dir: Path, row: BankRow, workdir: Path, config: BatConfig) -> Any:
    """The built-in environment positioned at the row's start: fresh workspace from the state package (digest-checked),
    grader side rebuilt from the practice task outside it, prefix records as `prior_records`. Call `reset()`
    on the returned env to get the brief, then `step(...)`."""
    from bat.bank.practice import write_grader
    from bat.bank.replay import PRIOR_RECORDS
    from bat.benchmark.bank_side import open_instance
    from bat.sandbox import ExecutionRecord
    from bat.state.jsonl import read_jsonl

    state_dir = Path(bank_dir) / row.state.path
    workspace = materialize(state_dir, Path(workdir) / "ws")
    grader = write_grader(row.task, config, Path(workdir) / "grader_build")
    prior = read_jsonl(state_dir / PRIOR_RECORDS, ExecutionRecord) if (state_dir / PRIOR_RECORDS).exists() else []
    return open_instance(None, workspace, grader, config, prior)
