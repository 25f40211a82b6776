"""Index by track/stage/outcome/reward source; pools S-target / S-mix / E2E are views of it."""

import pytest
from pydantic import ValidationError

from bat.bank.pools import build_index, pool_rows
from bat.schemas.bank import BankRow, ChatMessage


@pytest.fixture
def rows(row_factory):
    return [
        row_factory("a1", "S1"),
        row_factory("a3", "S3", outcome="recovery"),
        row_factory("b3", "S3", track="vqa", outcome="failure"),
        row_factory("b5", "S5", track="vqa"),
        row_factory("e1", "E2E"),
        row_factory("e2", "E2E", track="vqa"),
    ]


def test_index_keys(rows):
    index = build_index(rows)
    assert index.by_stage == {"E2E": ["e1", "e2"], "S1": ["a1"], "S3": ["a3", "b3"], "S5": ["b5"]}
    assert index.by_track["vqa"] == ["b3", "b5", "e2"]
    assert index.by_outcome == {"failure": ["b3"], "recovery": ["a3"], "success": ["a1", "b5", "e1", "e2"]}
    assert index.by_reward_source == {"e2e_rubric_task": ["e1", "e2"], "stage_rubric": ["a1", "a3", "b3", "b5"]}


def test_pools_are_views(rows):
    index = build_index(rows)
    assert pool_rows(index, "S-target", "S3") == ["a3", "b3"]
    assert pool_rows(index, "S-mix", "S3") == ["a1", "b5"]
    assert pool_rows(index, "E2E") == ["e1", "e2"]
    assert pool_rows(index, "S-target", "S3", tracks=["vqa"]) == ["b3"]
    assert pool_rows(index, "S-mix", "S1", outcomes=["success"]) == ["b5"]
    all_ids = (
        set(pool_rows(index, "S-target", "S3")) | set(pool_rows(index, "S-mix", "S3")) | set(pool_rows(index, "E2E"))
    )
    assert all_ids == {r.state_id for r in rows}


def test_bad_pool_requests_list_valid_values(rows):
    index = build_index(rows)
    with pytest.raises(ValueError, match=r"valid pools: \['S-target', 'S-mix', 'E2E'\]"):
        pool_rows(index, "S-all", "S3")
    with pytest.raises(ValueError, match="stages in this bank"):
        pool_rows(index, "S-target", "S4")
    with pytest.raises(ValueError, match="needs a target stage"):
        pool_rows(index, "S-mix")
    with pytest.raises(ValueError, match="duplicate state_id"):
        build_index(rows + rows[:1])


def test_rl_rows_refuse_transcripts(rows):
    data = rows[0].model_dump()
    data["prompt"] = data["prompt"] + [ChatMessage(role="assistant", content="the answer").model_dump()]
    with pytest.raises(ValidationError, match="RL rows carry no assistant"):
        BankRow.model_validate(data)
