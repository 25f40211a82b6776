"""The grpo phase with `grpo.rollouts: online` on the real bank (configs/smoke.yaml, tiny model), and the
shuffled-reward twin's permutations."""

from __future__ import annotations

from pathlib import Path

from bat.online.rewards import identical_groups
from bat.schemas.rollout import RewardRecord
from bat.train.twin import shuffled, twin_rewards

REPO = Path(__file__).resolve().parents[2]


def _reward(rid: str, state: str, value: float | None, valid: bool = True) -> RewardRecord:
    return RewardRecord(
        rollout_id=rid, state_id=state, round=1, pool="S-target", stage="S1", reward_version="v", judge="none", items=[],
        reward=value, valid=valid, invalid_reason=None if valid else "x",
    )  # fmt: skip


def test_twin_permutes_values_within_each_batch_and_leaves_invalid_alone():
    rewards = [_reward(f"a{i}", "a", i / 10) for i in range(4)] + [_reward(f"b{i}", "b", 1.0 + i) for i in range(4)]
    rewards.append(_reward("a-bad", "a", None, valid=False))
    twin = twin_rewards(rewards, [["a"], ["b"]], seed=11)
    assert [r.rollout_id for r in twin] == [r.rollout_id for r in rewards]
    assert sorted(r.reward for r in twin[:4]) == [0.0, 0.1, 0.2, 0.3]  # batch a keeps its values
    assert sorted(r.reward for r in twin[4:8]) == [1.0, 2.0, 3.0, 4.0]
    assert twin[8] == rewards[8]
    assert twin == twin_rewards(rewards, [["a"], ["b"]], seed=11)  # seeded
    across = twin_rewards(rewards, None, seed=11)
    assert sorted(r.reward for r in across[:8]) == sorted(r.reward for r in rewards[:8])
    assert [r.reward for r in across[:8]] != [r.reward for r in rewards[:8]]


def test_pass_rate_filter_sets_aside_states_always_failed_or_solved():
    from bat.online.pass_rate import PassRateFilter, outcome

    assert [outcome([0.0, 0.0]), outcome([1.0, 1.0]), outcome([0.0, 1.0]), outcome([0.5, 0.5])] == [
        "fail",
        "solve",
        "mixed",
        "mixed",
    ]
    rate = PassRateFilter(2)
    draw = [_reward("a0", "a", 0.0), _reward("a1", "a", 0.0), _reward("b0", "b", 1.0), _reward("b1", "b", 0.0)]
    rate.observe(draw)
    assert rate.allows("a") and rate.allows("b")
    rate.observe(draw)
    assert not rate.allows("a") and rate.allows("b") and rate.counts() == {"S-target": 1}


def test_identical_groups_are_those_without_signal():
    rewards = [_reward("a0", "a", 1.0), _reward("a1", "a", 1.0), _reward("b0", "b", 0.0), _reward("b1", "b", 0.5)]
    assert identical_groups(rewards) == ["a"]
    assert identical_groups(shuffled(rewards, 3)) in ([], ["a"], ["b"])


def test_online_round_on_the_real_bank(tmp_path):
    """Bootstrap + one round whose GRPO block rolls out a fresh plan batch at every step (the twin on, dynamic
    sampling on): per-step rollout and reward shards, per-pool rewards and signal counts, the candidate."""
    from bat.cli.main import main
    from bat.state.jsonl import read_jsonl
    from bat.state.layout import RunLayout
    from bat.state.online_layout import OnlineLayout

    state = tmp_path / "run"
    sets = ["grpo.rollouts=online", "grpo.steps=3", "grpo.shuffle_rewards=true", "grpo.dynamic_sampling=1"]
    sets += ["grpo.pass_rate_filter=1", "grpo.online_record=false", "rollout.stage_row_turns=2"]
    argv = ["run", "--config", str(REPO / "configs" / "smoke.yaml"), "--state", str(state), "--executor", "debug"]
    assert main([*argv, *[x for s in sets for x in ("--set", s)]]) == 0
    layout = RunLayout(state)
    metrics = read_jsonl(layout.training_metrics(1, "grpo"))
    assert [m["step"] for m in metrics] == [1, 2, 3]
    for m in metrics:
        assert m["shuffled_rewards"] is True and m["rollouts_drawn"] == 8
        assert set(m["reward_mean_by_pool"]) == {"S-target", "S-mix", "E2E"}
        assert 0 <= m["groups_identical"] <= m["groups_identical_drawn"] + m["groups_replaced"]
    # the untrained tiny policy fails every smoke state: each is set aside after its first draw
    assert sum(metrics[-1]["states_set_aside_by_pool"].values()) >= 4
    online = OnlineLayout(layout.phase_dir(1, "grpo"))
    for step in range(3):
        assert (online.rollout(step) / "shard_0000" / "rollouts.jsonl").is_file()
        assert (online.rewards(step) / "rewards.jsonl").is_file()
    assert not online.scratch_root.exists()
    assert (layout.candidate_model(1) / "model.safetensors").is_file()
    # no record batch: the round's rollout phase rolled out nothing, the block's steps are the round's rollouts
    assert not list(layout.phase_dir(1, "rollout").glob("shard_*"))
    stage_rows = [
        r
        for step in range(3)
        for r in read_jsonl(online.rollout(step) / "shard_0000" / "rollouts.jsonl")
        if r["stage"] != "E2E"
    ]
    assert stage_rows and all(len(r["turns"]) <= 2 for r in stage_rows)


def test_the_phase_table_imports_without_torch():
    """A login node's driver-only venv has no torch: the phase table (and `bat doctor`) must import without it."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "for m in ('torch', 'transformers', 'deepspeed'): sys.modules[m] = None\n"
        "import bat.orchestrate.executors, bat.doctor.checks\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
