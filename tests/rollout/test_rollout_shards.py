"""Shards: DONE markers, resume after an interruption yields identical shards, finished shards are skipped."""

from __future__ import annotations

import pytest
from rollout_doubles import ToyEnv

from bat.config.rollout import RolloutBudgets
from bat.rollout import runner as runner_mod
from bat.rollout.chat import TurnTokens
from bat.rollout.engine_hf import HFEngine
from bat.rollout.runner import OpenedEnv, StateJob, run_shards
from bat.rollout.shards import read_rollouts, read_shard, shard_dir
from bat.rollout.spec import LoopSettings
from bat.state.digest import sha256_tree

JOBS = [StateJob(state_id=f"st{i}", pool="S-target", stage="S3") for i in range(3)]


def go(phase_dir, tiny_model, tokenizer, tmp_path, counter):
    def engine_factory():
        counter["engines"] += 1
        return HFEngine(tiny_model)

    def open_env(job, k, workdir):
        counter["envs"] += 1
        env = ToyEnv(workdir / "ws")
        return OpenedEnv(
            env=env,
            workspace=env.workspace,
            messages=[{"role": "user", "content": f"state {job.state_id} rollout {k}"}],
        )

    settings = LoopSettings(
        budgets=RolloutBudgets(max_assistant_turns=2, max_tool_calls=2, max_new_tokens_per_turn=8),
        temperature=1.0,
        no_tool_call="observe",
    )
    return run_shards(
        phase_dir,
        JOBS,
        k=2,
        states_per_shard=2,
        run_seed=42,
        round_index=1,
        open_env=open_env,
        engine_factory=engine_factory,
        turn_tokens=lambda: TurnTokens(tokenizer),
        settings=settings,
        scratch=tmp_path / "scratch" / phase_dir.name,
    )


def test_interrupted_phase_resumes_with_identical_shards(tiny_model, tokenizer, tmp_path, monkeypatch):
    clean, counter = tmp_path / "clean", {"engines": 0, "envs": 0}
    summary = go(clean, tiny_model, tokenizer, tmp_path, counter)
    assert summary.written == [0, 1] and counter["envs"] == 6
    records = read_rollouts(clean)
    assert len(records) == 6 and [r.k for r in records] == [0, 1] * 3
    assert len({r.rollout_id for r in records}) == 6 and len({r.seed for r in records}) == 6
    assert {r.state_id for r in read_shard(shard_dir(clean, 1))} == {"st2"}
    assert all(r.evidence_dir and (shard_dir(clean, r.shard) / r.evidence_dir / "README.md").is_file() for r in records)

    # interrupted run: the second shard write dies half-way (after its temp dir has content)
    broken, counter2 = tmp_path / "broken", {"engines": 0, "envs": 0}
    real_write = runner_mod.write_shard

    def dying_write(phase_dir, index, *args, **kwargs):
        if index == 1:
            raise KeyboardInterrupt("preempted")
        return real_write(phase_dir, index, *args, **kwargs)

    monkeypatch.setattr(runner_mod, "write_shard", dying_write)
    with pytest.raises(KeyboardInterrupt):
        go(broken, tiny_model, tokenizer, tmp_path, counter2)
    assert (shard_dir(broken, 0) / "DONE.json").is_file() and not shard_dir(broken, 1).exists()
    assert len(read_rollouts(broken)) == 4
    monkeypatch.setattr(runner_mod, "write_shard", real_write)

    counter3 = {"engines": 0, "envs": 0}
    resumed = go(broken, tiny_model, tokenizer, tmp_path, counter3)
    assert resumed.skipped == [0] and resumed.written == [1] and counter3["envs"] == 2
    for index in (0, 1):
        a, b = shard_dir(clean, index), shard_dir(broken, index)
        assert (a / "rollouts.jsonl").read_bytes() == (b / "rollouts.jsonl").read_bytes()
        assert sha256_tree(a / "evidence") == sha256_tree(b / "evidence")

    # a finished phase is a no-op that does not even load the model
    counter4 = {"engines": 0, "envs": 0}
    again = go(broken, tiny_model, tokenizer, tmp_path, counter4)
    assert again.skipped == [0, 1] and counter4 == {"engines": 0, "envs": 0}
