"""Reward formulas and the trusted evidence view (files that mimic evidence are ignored)."""

from __future__ import annotations

import pytest

from bat.rollout.workspace import sha256_file
from bat.schemas.rollout import TurnRecord
from bat.verify.evidence import trusted_view
from bat.verify.reward import e2e_reward, eta_from, stage_reward


def test_stage_reward_is_eta_times_mean():
    assert stage_reward({"a": True, "b": False, "c": True, "d": True}, 0.5) == pytest.approx(0.375)
    assert stage_reward({"a": True}, 1.0) == 1.0
    assert stage_reward({"a": True, "b": None}, 1.0) is None  # a null verdict is never a silent 0
    assert stage_reward({"a": True}, None) is None
    assert stage_reward({}, 1.0) is None
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        stage_reward({"a": True}, 1.5)


def test_e2e_reward_mixes_weighted_stage_mean_and_task():
    stages = {"S1": 1.0, "S2": 1.0, "S3": 0.0, "S4": 1.0, "S5": 1.0}  # weighted mean = 0.65
    assert e2e_reward(stages, 0.4) == pytest.approx(0.5 * 0.65 + 0.5 * 0.4)
    assert e2e_reward(stages, 0.4, stage_weight=1.0) == pytest.approx(0.65)
    # not-applicable stage dropped and weights renormalised: without S3 every stage is 1.0
    assert e2e_reward(stages, 0.0, not_applicable=["S3"]) == pytest.approx(0.5)
    assert e2e_reward({**stages, "S2": None}, 0.4) is None
    assert e2e_reward(stages, None) is None


def test_eta_is_fraction_of_required_evidence():
    assert eta_from({"e1": True, "e2": False, "x": True}, ["e1", "e2"]) == 0.5
    assert eta_from({}, []) == 1.0


def _turn(i, name, written=None, deleted=()):
    return TurnRecord(
        index=i,
        response_text="",
        generated_tokens=1,
        finish="stop",
        call={"name": name, "arguments": {}},
        files_written=written or {},
        files_deleted=list(deleted),
    )


def test_trusted_view_drops_planted_modified_and_wrong_owner_files(tmp_path):
    ev = tmp_path / "evidence"
    (ev / "outputs").mkdir(parents=True)
    (ev / "task").mkdir()
    (ev / "task/README.md").write_text("brief")
    initial = {"task/README.md": sha256_file(ev / "task/README.md")}
    (ev / "plan.md").write_text("plan by write_plan")
    (ev / "outputs/case_1.npy").write_bytes(b"by run_model")
    (ev / "outputs/case_2.npy").write_bytes(b"by execute_code")
    (ev / "outputs/case_3.npy").write_bytes(b"later edited")
    turns = [
        _turn(0, "write_plan", {"plan.md": sha256_file(ev / "plan.md")}),
        _turn(
            1,
            "run_model",
            {"outputs/case_1.npy": sha256_file(ev / "outputs/case_1.npy"), "outputs/case_3.npy": "sha256:" + "0" * 64},
        ),
        _turn(2, "execute_code", {"outputs/case_2.npy": sha256_file(ev / "outputs/case_2.npy")}),
    ]
    # planted after the rollout: never produced by reset or a tool call
    (ev / "submission").mkdir()
    (ev / "submission/manifest.json").write_text('{"results": "forged"}')
    owners = {"plan.md": ("write_plan",), "outputs/": ("run_model",), "submission/": ("submit",)}
    report = trusted_view(ev, initial, turns, tmp_path / "view", owners)
    assert report.kept == ["outputs/case_1.npy", "plan.md", "task/README.md"]
    assert report.untracked == ["submission/manifest.json"]
    assert report.modified == ["outputs/case_3.npy"]
    assert report.wrong_owner == ["outputs/case_2.npy"]
    view = sorted(p.relative_to(tmp_path / "view").as_posix() for p in (tmp_path / "view").rglob("*") if p.is_file())
    assert view == report.kept


def test_trusted_view_follows_deletes_and_rewrites(tmp_path):
    ev = tmp_path / "ev"
    ev.mkdir()
    (ev / "a.txt").write_text("v2")
    turns = [
        _turn(0, "x", {"a.txt": "sha256:" + "1" * 64}),
        _turn(1, "x", {"a.txt": sha256_file(ev / "a.txt")}),
        _turn(2, "x", {"b.txt": "sha256:" + "2" * 64}),
        _turn(3, "x", deleted=["b.txt"]),
    ]
    report = trusted_view(ev, {}, turns, tmp_path / "v")
    assert report.kept == ["a.txt"] and report.missing == []
