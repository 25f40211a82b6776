"""Fixtures for bank tests: small hand-built records (no benchmark needed)."""

import pytest

from bat.schemas.bank import PracticeTask, Trajectory, TrajectoryTurn

ONE_TASK_BANK = (
    "bank.tracks=[classification]",
    "bank.tasks_per_track=1",
    "bank.e2e_per_track=0",
    "bank.outcomes=[success]",
    "benchmark.runtime=inprocess",
    "leakage.enabled=false",
)
"""Config overrides of a one-task bank (classification, success, no E2E, in-process tools, no leakage index)."""


@pytest.fixture
def one_task_bank() -> list[str]:
    """`ONE_TASK_BANK` as a list to extend."""
    return list(ONE_TASK_BANK)


SKILLS = {f"S{i}": f"Skill text of stage S{i}." for i in range(1, 6)}
ORDER = ("S1", "S2", "S3", "S4", "S5")


def make_trajectory(tid: str = "trj-a", outcome: str = "success", long_obs: int = 0) -> Trajectory:
    turns = []
    for t, stage in enumerate(ORDER):
        call = {"name": f"tool_{stage.lower()}", "arguments": {"n": t}}
        response = f'Step {t}.\n<tool_call>{{"name": "tool_{stage.lower()}", "arguments": {{"n": {t}}}}}</tool_call>'
        turns.append(
            TrajectoryTurn(t=t, stage=stage, response=response, call=call, observation="ok " * (1 + long_obs * t))
        )
    task = PracticeTask(task_id=f"task-{tid}", track="classification", seed=3, variant="expert")
    return Trajectory(
        trajectory_id=tid,
        task=task,
        outcome=outcome,
        teacher="scripted:expert",
        brief="Classify the fictional lesions.",
        turns=turns,
        stage_scores=dict.fromkeys(ORDER, 1.0),
        task_score=1.0,
        overall=1.0,
        checked=True,
    )


@pytest.fixture
def trajectory_factory():
    """`make_trajectory(tid, outcome, long_obs)` as a fixture."""
    return make_trajectory


def make_row(state_id: str, stage: str, track: str = "classification", outcome: str = "success"):
    """A syntactically complete RL row (no real state package behind it)."""
    from bat.schemas.bank import BankRow, ChatMessage, Provenance, StateRef

    task = PracticeTask(task_id=f"task-{state_id}", track=track, seed=1, variant="expert")
    return BankRow(
        state_id=state_id,
        stage=stage,
        track=track,
        outcome=outcome,
        reward_source="e2e_rubric_task" if stage == "E2E" else "stage_rubric",
        task=task,
        state=StateRef(path=f"states/{state_id}", digest="sha256:" + "0" * 64, files=0, bytes=0),
        prompt=[ChatMessage(role="system", content="skill"), ChatMessage(role="user", content="brief")],
        rubric=[],
        evidence=[],
        skill="skill",
        provenance=Provenance(
            source=f"practice:{track}",
            generator="test",
            generator_version="0",
            teacher="scripted:expert",
            seeds={"task": 1},
            trajectory_id="trj",
            prefix_turns=0,
        ),
    )


@pytest.fixture
def row_factory():
    """`make_row(state_id, stage, track, outcome)` as a fixture."""
    return make_row
