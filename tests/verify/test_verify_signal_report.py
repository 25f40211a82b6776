"""The signal report over a run's finished rounds: by pool, by the bank state's outcome, by group size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bat.schemas.rollout import RewardRecord
from bat.verify.signal_report import main, signal_report


@pytest.fixture(scope="module")
def run_with_round(tmp_path_factory) -> Path:
    """A run with a real practice bank (one track; success and recovery states) and one finished round whose
    verify shard rewards a success state 0/0/0/0 and a recovery state 0/1/1/1 (K 4)."""
    from bat.bank.synthesize import synthesize
    from bat.config import load_config
    from bat.schemas.routing import PlanRow, RoundPlan
    from bat.state.atomic import atomic_write_json
    from bat.state.layout import RunLayout
    from bat.verify.shards import write_reward_shard

    run = tmp_path_factory.mktemp("signal") / "run"
    layout = RunLayout(run)
    cfg = load_config(
        None,
        [
            "bank.tracks=[classification]",
            "bank.tasks_per_track=1",
            "bank.e2e_per_track=0",
            "bank.outcomes=[success, recovery]",
            "benchmark.runtime=inprocess",
            "leakage.enabled=false",
            "bank.validation_fraction=0",
        ],
    )
    bank, _ = synthesize(cfg, layout)
    rows = {r.outcome: r for r in bank.rows()}
    success, recovery = rows["success"], rows["recovery"]
    layout.round_dir(1).mkdir(parents=True)
    plan = RoundPlan(
        round=1,
        arm="bicurl",
        target_stage=recovery.stage,
        mixture={"S-target": 1, "S-mix": 1},
        reward_mode="rubric",
        bank_version=bank.version,
        start_checkpoint=str(run / "sft"),
        seed=1,
        batches=[
            [
                PlanRow(state_id=recovery.state_id, pool="S-target", stage=recovery.stage),
                PlanRow(state_id=success.state_id, pool="S-mix", stage=success.stage),
            ]
        ],
    )
    atomic_write_json(layout.plan(1), plan.model_dump(mode="json"))
    rewards = [_reward(success.state_id, "S-mix", success.stage, k, 0.0) for k in range(4)]
    rewards += [
        _reward(recovery.state_id, "S-target", recovery.stage, k, r) for k, r in enumerate([0.0, 1.0, 1.0, 1.0])
    ]
    write_reward_shard(layout.phase_dir(1, "verify") / "shard_0000", rewards, {})
    return run


def _reward(state: str, pool: str, stage: str, k: int, reward: float) -> RewardRecord:
    return RewardRecord(
        rollout_id=f"{state}-k{k}",
        state_id=state,
        round=1,
        pool=pool,
        stage=stage,
        items=[],
        reward=reward,
        valid=True,
        reward_version="v1",
        judge="rubric",
    )


def test_report_splits_groups_by_pool_outcome_and_group_size(run_with_round: Path) -> None:
    report = signal_report([run_with_round], [2, 4])
    assert report["rounds"] == 1
    assert report["by_pool"]["S-mix"] == {"groups": {2: 1, 4: 1}, "identical": {2: 1.0, 4: 1.0}}
    assert report["by_pool"]["S-target"] == {"groups": {2: 1, 4: 1}, "identical": {2: 3 / 6, 4: 0.0}}
    by_outcome = {(r["pool"], r["outcome"]): r for r in report["by_outcome"]}
    assert by_outcome[("S-target", "recovery")] == {
        "pool": "S-target",
        "outcome": "recovery",
        "groups": 1,
        "rollouts": 4,
        "reward_mean": 0.75,
        "groups_identical": 0,
    }
    assert by_outcome[("S-mix", "success")]["groups_identical"] == 1


def test_cli_prints_json_and_markdown(run_with_round: Path, capsys) -> None:
    assert main([str(run_with_round), "--sizes", "2", "4"]) == 0
    assert json.loads(capsys.readouterr().out)["by_pool"]["S-mix"]["groups"] == {"2": 1, "4": 1}
    assert main([str(run_with_round), "--markdown"]) == 0  # default sizes up to 8: no group of the K 4 round has 8
    out = capsys.readouterr().out
    assert "| S-mix | 1.0 of 1 (100%) | 1.0 of 1 (100%) | no group | no group |" in out
    assert "| S-target | recovery | 1 | 4 | 0.750 | 0 |" in out
    assert main([str(run_with_round), "--sizes", "1"]) == 2
    assert ">= 2" in capsys.readouterr().err


def test_cli_names_a_folder_without_rounds(tmp_path: Path, capsys) -> None:
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path.resolve()) in err and "no round_NN folders" in err


def test_cli_names_a_plan_that_is_not_a_plan(run_with_round: Path, tmp_path: Path, capsys) -> None:
    import shutil

    run = tmp_path / "run"
    shutil.copytree(run_with_round, run)
    (run / "round_01" / "plan.json").write_text('{"round": 1}')
    assert main([str(run)]) == 2
    err = capsys.readouterr().err
    assert "round_01/plan.json: not a round plan" in err and "Traceback" not in err


def test_collect_keeps_each_groups_rewards_and_outcome_with_the_piece(run_with_round: Path, tmp_path: Path) -> None:
    from bat.experiment.collect import _group_rewards
    from bat.state.layout import RunLayout

    [(index, groups)] = _group_rewards(RunLayout(run_with_round)).items()
    assert index == 1
    assert [(g.pool, g.outcome, g.rewards) for g in groups] == [
        ("S-mix", "success", [0.0, 0.0, 0.0, 0.0]),
        ("S-target", "recovery", [0.0, 1.0, 1.0, 1.0]),
    ]
    assert _group_rewards(RunLayout(tmp_path / "no-rounds")) == {}


def test_a_committed_record_with_group_rewards_gives_the_same_report(run_with_round: Path, tmp_path: Path) -> None:
    from bat.experiment.collect import _group_rewards
    from bat.state.layout import RunLayout

    piece = tmp_path / "seed_1.json"
    kept = _group_rewards(RunLayout(run_with_round))
    signal = [{"round": r, "group_rewards": [x.to_json() for x in g]} for r, g in kept.items()]
    piece.write_text(json.dumps({"signal": signal}))
    assert signal_report([piece], [2, 4]) == {**signal_report([run_with_round], [2, 4]), "runs": [str(piece)]}
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"signal": [{"round": 1, "reward_mean": 0.5}]}))
    assert main([str(old)]) == 2
