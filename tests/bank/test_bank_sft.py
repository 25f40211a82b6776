"""SFT slicing (Eq. 9): one row per response, context = everything earlier, overlong rejected, grouped split."""

from bat.bank.sft import ApproxLengthMeter, SliceStats, slice_trajectory, split_by_trajectory
from bat.schemas.bank import E2E

SKILLS = {f"S{i}": f"Skill text of stage S{i}." for i in range(1, 6)}
ORDER = ("S1", "S2", "S3", "S4", "S5")


def _slice(traj, max_length=10_000, e2e=False, agent_context=False):
    stats = SliceStats()
    rows = slice_trajectory(
        traj,
        skills=SKILLS,
        stage_order=ORDER,
        meter=ApproxLengthMeter(3.0),
        max_length=max_length,
        split="train",
        stats=stats,
        e2e=e2e,
        agent_context=agent_context,
    )
    return rows, stats


def test_one_row_per_response_with_full_history(trajectory_factory):
    traj = trajectory_factory()
    rows, stats = _slice(traj)
    assert [r.turn for r in rows] == [0, 1, 2, 3, 4]
    for row, turn in zip(rows, traj.turns):
        assert row.target == turn.response
        assert row.stage == turn.stage
        assert row.messages[0].role == "system" and f"Skill text of stage {turn.stage}" in row.messages[0].content
        assert row.messages[1].role == "user" and row.messages[1].content == traj.brief
        history = row.messages[2:]
        assert [m.role for m in history] == ["assistant", "tool"] * turn.t
        assert [m.content for m in history[::2]] == [t.response for t in traj.turns[: turn.t]]
        assert [m.content for m in history[1::2]] == [t.observation for t in traj.turns[: turn.t]]
        assert turn.response not in [m.content for m in row.messages]
        assert row.loss_mask.context_messages == len(row.messages)
    assert stats.as_dict()["kept"] == 5 and stats.as_dict()["overlong"] == 0


def test_overlong_rows_rejected_not_clipped(trajectory_factory):
    traj = trajectory_factory(long_obs=200)
    rows, stats = _slice(traj, max_length=400)
    lengths = {r.turn: r.length for r in rows}
    assert all(length <= 400 for length in lengths.values())
    assert stats.as_dict()["overlong"] == 5 - len(rows) > 0
    for row in rows:  # kept rows are complete, never truncated
        assert row.target == traj.turns[row.turn].response
        assert len(row.messages) == 2 + 2 * row.turn


def test_e2e_rows_carry_all_skills(trajectory_factory):
    rows, _ = _slice(trajectory_factory(), e2e=True)
    assert {r.stage for r in rows} == {E2E}
    assert all(all(f"stage S{i}" in r.messages[0].content for i in range(1, 6)) for r in rows)


def test_agent_context_rows_keep_their_stage_and_share_one_opening(trajectory_factory):
    traj = trajectory_factory()
    rows, _ = _slice(traj, agent_context=True)
    assert [r.stage for r in rows] == [t.stage for t in traj.turns]  # stage keys kept
    assert len({r.messages[0].content for r in rows}) == 1  # one system turn: the agent's, every stage skill
    assert all(f"stage S{i}" in rows[0].messages[0].content for i in range(1, 6))
    longest = rows[-1].messages
    for row in rows[:-1]:  # every row is a prefix of the last one's context: they pack into one sequence
        assert longest[: len(row.messages)] == row.messages


def test_split_grouped_by_trajectory_and_seeded():
    ids = [f"t{i}" for i in range(20)]
    a = split_by_trajectory(ids, 0.2, seed=1)
    assert a == split_by_trajectory(list(reversed(ids)), 0.2, seed=1)
    assert sum(v == "validation" for v in a.values()) == 4
    assert set(a) == set(ids)
    assert "validation" in split_by_trajectory(["x", "y"], 0.1, seed=1).values()
    assert split_by_trajectory(["x"], 0.5, seed=1) == {"x": "train"}
    assert set(split_by_trajectory(ids, 0.0, seed=1).values()) == {"train"}
