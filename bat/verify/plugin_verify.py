"""Verify rollouts on a plug-in benchmark's bank rows through `bat.staged.interface`: re-run, score, reward.

Nothing the rollout wrote is trusted: each rollout's recorded actions are replayed in a fresh environment the
benchmark restores at the row's stored stage state (`Benchmark.open(task, workdir, state=...)`), the replayed
observations must equal the recorded ones, and the environment's own `score()` grades the result. The reward is
Eq. 4 with eta = 1 (a plug-in benchmark names no evidence ids) over the row's criteria: the stage's criteria for a
stage row, the union over every stage for an E2E row (`verify.e2e_reward: union_rubric`; `stage_mix` mixes the
Agentic score and the task metric); `final` rounds pay the task metric or Overall (`verify.final_reward`).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.schemas.bank import E2E
from bat.schemas.rollout import ItemVerdict, RewardRecord, RolloutRecord
from bat.verify.reward import e2e_reward, invalid_reward, reward_fields, stage_reward

if TYPE_CHECKING:
    from bat.config.root import BatConfig
    from bat.schemas.bank import BankRow
    from bat.staged.interface import Benchmark


@dataclass
class PluginVerifier:
    """Binds config, benchmark and reward mode; `verify_shard` rewards a rollout shard."""

    config: BatConfig
    bench: Benchmark
    reward_mode: str = "rubric"
    judge_identity: str = "none"

    def _base(self, rec: RolloutRecord) -> dict[str, Any]:
        return reward_fields(rec, self.config.verify.reward_version, self.judge_identity)

    def invalid(self, rec: RolloutRecord, reason: str, **extra: Any) -> RewardRecord:
        return invalid_reward(self._base(rec), reason, **extra)

    def replay(self, rec: RolloutRecord, row: BankRow, bank_dir: Path, workdir: Path) -> Any:
        """The benchmark's score of the rollout's actions replayed from the row's state; a diverging observation
        raises ValueError."""
        from bat.bank.plugin_states import open_row

        shutil.rmtree(workdir, ignore_errors=True)
        try:
            with open_row(self.bench, bank_dir, row, workdir) as env:
                env.reset()
                for turn in rec.turns:
                    action = turn.call or turn.invalid
                    if action is None or turn.record is None:
                        continue  # the turn never reached the environment
                    step = env.step(action)
                    if not turn.observation_truncated and step.observation != turn.observation:
                        raise ValueError(f"replay of turn {turn.index} diverged from the rollout's observation")
                return env.score()
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def verify(self, rec: RolloutRecord, row: BankRow, bank_dir: Path, workdir: Path) -> RewardRecord:
        """Reward of one rollout of `row` (see the module docstring)."""
        if not rec.valid:
            return self.invalid(rec, f"rollout invalid: {rec.invalid_reason}")
        try:
            score = self.replay(rec, row, bank_dir, workdir)
        except ValueError as exc:
            return self.invalid(rec, str(exc)[:500])
        wanted = {c.id for c in row.rubric}
        items = [
            ItemVerdict(
                item_id=item,
                verdict=verdict,
                source="grader",
                detail="" if verdict is not None else "; ".join(score.null_reasons),
            )
            for stage, verdicts in score.items.items()
            for item, verdict in verdicts.items()
            if item in wanted and (row.stage == E2E or stage == row.stage)
        ]
        extra = {"items": items, "breach": bool(score.breach), "task_score": score.task}
        nulls = sorted(v.item_id for v in items if v.verdict is None)
        if nulls:
            return self.invalid(rec, f"null verdicts {nulls}: {'; '.join(score.null_reasons)}"[:500], **extra)
        if self.reward_mode == "final":
            which = self.config.verify.final_reward
            final = score.task if which == "task" else score.overall
            if final is None:
                return self.invalid(rec, f"final {which} score is null: {list(score.null_reasons)}", **extra)
            return RewardRecord(
                **self._base(rec), stage_scores=dict(score.stages), reward=float(final), valid=True, **extra
            )
        if score.breach:
            return RewardRecord(**self._base(rec), reward=0.0, eta=0.0, valid=True, **extra)
        verdicts = {v.item_id: v.verdict for v in items}
        if row.stage != E2E:
            reward = stage_reward(verdicts, 1.0)
            if reward is None:
                return self.invalid(rec, f"no applicable criterion of {row.stage} could be scored", **extra)
            return RewardRecord(
                **self._base(rec), eta=1.0, stage_scores={row.stage: reward}, reward=reward, valid=True, **extra
            )
        if self.config.verify.e2e_reward == "union_rubric":
            reward = stage_reward(verdicts, 1.0)
        else:
            absent = [s.key for s in self.config.stages if s.key not in score.stages]
            reward = e2e_reward(
                score.stages, score.task, self.config.stages, self.config.verify.e2e_stage_weight, absent
            )
        if reward is None:
            return self.invalid(rec, f"E2E reward is null (stages {dict(score.stages)}, task {score.task})", **extra)
        return RewardRecord(
            **self._base(rec), eta=1.0, stage_scores=dict(score.stages), reward=reward, valid=True, **extra
        )

    def verify_shard(self, shard: Path, bank: Any, scratch: Path) -> list[RewardRecord]:
        """Rewards of every rollout in one rollout shard, in record order."""
        from bat.rollout.shards import read_shard

        return [
            self.verify(rec, bank.row(rec.state_id), bank.path, Path(scratch) / "rollouts" / rec.rollout_id)
            for rec in read_shard(shard)
        ]


def plugin_verifier(config: BatConfig, reward_mode: str = "rubric") -> PluginVerifier:
    """A `PluginVerifier` on the configured benchmark (no LLM judge: a plug-in benchmark's `score()` decides)."""
    from bat.bank.plugin_states import benchmark

    if reward_mode not in ("rubric", "final"):
        raise ValueError(f"unknown reward mode {reward_mode!r}; valid: ['rubric', 'final']")
    return PluginVerifier(config=config, bench=benchmark(config), reward_mode=reward_mode)
