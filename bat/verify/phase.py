"""Phase "verify": rubric rewards for every finished rollout shard of the round.

Reads `round_NN/rollout/shard_NNNN/` (records + evidence), `round_NN/plan.json` (reward mode, bank version)
and the bank rows (rubric c, evidence G, practice seed for the grader side); writes
`round_NN/verify/shard_NNNN/rewards.jsonl` + DONE.json per rollout shard (resumable, shard by shard).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.phase.context import PhaseContext, PhaseResult
from bat.phase.events import log_event
from bat.phase.plan import load_plan
from bat.phase.spec import Maybe, PhaseSpec, first_bank
from bat.rollout.shards import finished_shards, read_shard, read_timings
from bat.schemas.rollout import RolloutRecord
from bat.state.round_layout import ShardLayout
from bat.verify.shards import reward_meta, write_reward_shard
from bat.verify.verifier import StateTruth, Verifier

if TYPE_CHECKING:
    from bat.config.root import BatConfig


def make_verifier(config: BatConfig, reward_mode: str = "rubric") -> Any:
    """A Verifier on the benchmark's grader and rubric; the judge is used when `verify.judge.enabled`. A plug-in
    benchmark (`benchmark.name` other than `builtin`) gets a `PluginVerifier` (`bat.verify.plugin_verify`)."""
    if config.benchmark.name != "builtin":
        from bat.verify.plugin_verify import plugin_verifier

        return plugin_verifier(config, reward_mode)
    from bat.benchmark.contract import rubric
    from bat.benchmark.grader import grade
    from bat.benchmark.judge_client import JudgeClient

    if reward_mode not in ("rubric", "final"):
        raise ValueError(f"unknown reward mode {reward_mode!r}; valid: ['rubric', 'final']")

    def bound_grade(
        workspace: Path, grader_dir: Path, records: list[Any], *, judge: Any = None, judge_name: str = ""
    ) -> Any:
        return grade(workspace, grader_dir, records, config, judge=judge, judge_name=judge_name)

    def judgment_items(stage: str, track: str) -> dict[str, str]:
        return {item.id: item.text for item in rubric(stage, track, config.benchmark.contract) if item.judgment}

    judge = JudgeClient(config.verify.judge) if config.verify.judge.enabled else None
    return Verifier(
        config=config, grade=bound_grade, judge=judge, reward_mode=reward_mode, judgment_items=judgment_items
    )


def execution_records(rec: RolloutRecord, timings: list[dict[str, Any]]) -> list[Any]:
    """The rollout's ExecutionRecords rebuilt from its turns, volatile timing fields merged back."""
    from bat.sandbox.record import ExecutionRecord

    by_turn = {t.get("turn"): t for t in timings}
    out = []
    for turn in rec.turns:
        if turn.record is None:
            continue
        timing = {k: v for k, v in by_turn.get(turn.index, {}).items() if k != "turn"}
        out.append(ExecutionRecord.model_validate({**turn.record, **timing}))
    return out


def state_truth(bank: Any, state_id: str, config: BatConfig, workdir: Path) -> StateTruth:
    """Grader side regenerated from the row's practice seed + the row's rubric/evidence ids + prefix records."""
    from bat.rollout.envs import grader_side, prior_records

    row = bank.row(state_id)
    grader = grader_side(row.task, config, workdir)
    return StateTruth(
        state_id=state_id,
        stage=row.stage,
        track=row.track,
        grader_dir=grader,
        item_ids=[c.id for c in row.rubric],
        evidence_ids=[g.id for g in row.evidence],
        prior_records=prior_records(bank.state_dir(state_id)),
    )


def verify_shard(verifier: Any, shard: Path, bank: Any, config: BatConfig, scratch: Path) -> list[Any]:
    """Rewards of every rollout in one rollout shard (one grader side per state, shared by its K rollouts; a
    `PluginVerifier` replays each rollout from its state)."""
    if not isinstance(verifier, Verifier):
        return verifier.verify_shard(shard, bank, scratch)
    records, timings = read_shard(shard), read_timings(shard)
    truths: dict[str, StateTruth] = {}
    rewards = []
    for rec in records:
        if rec.state_id not in truths:
            truths[rec.state_id] = state_truth(bank, rec.state_id, config, scratch / "states" / rec.state_id)
        rewards.append(
            verifier.verify(
                rec,
                shard,
                truths[rec.state_id],
                execution_records(rec, timings.get(rec.rollout_id, [])),
                scratch / "rollouts" / rec.rollout_id,
            )
        )
    return rewards


def open_round(config: BatConfig, layout: Any, round_index: int) -> tuple[Any, Any, Any, list[Any]]:
    """(plan, bank version pinned by the plan, verifier of the plan's reward mode, finished rollout shards) of a
    round; FileNotFoundError when the round has no plan or no finished rollout shard."""
    from bat.bank.store import open_bank

    plan = load_plan(layout, round_index)
    rollout_dir = layout.phase_dir(round_index, "rollout")
    shards = finished_shards(rollout_dir)
    if not shards:
        raise FileNotFoundError(f"{rollout_dir}: no finished rollout shards to verify (run the rollout phase first)")
    return plan, open_bank(layout, plan.bank_version), make_verifier(config, plan.reward_mode), shards


def run_verify(ctx: PhaseContext) -> PhaseResult:
    """Verify every finished rollout shard that has no reward shard yet (none to verify when an online round keeps
    no record batch: `grpo.online_record` off)."""
    grpo = ctx.config.grpo
    if grpo.rollouts == "online" and not grpo.online_record:
        return PhaseResult(
            outputs=[], inputs=[ctx.layout.plan(ctx.round)], counts={"rewards": 0}, extra={"online_record": False}
        )
    plan, bank, verifier, shards = open_round(ctx.config, ctx.layout, ctx.round)
    final_reward = ctx.config.verify.final_reward if plan.reward_mode == "final" else None  # what `final` pays
    outputs, metas = [], []
    scratch_root = ctx.layout.phase_scratch(ctx.round, "verify")
    for shard in shards:
        out = ctx.phase_dir / shard.name
        if not ShardLayout(out).is_done():
            scratch = scratch_root / shard.name
            shutil.rmtree(scratch, ignore_errors=True)
            try:
                rewards = verify_shard(verifier, shard, bank, ctx.config, scratch)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            write_reward_shard(
                out,
                rewards,
                {
                    "reward_version": ctx.config.verify.reward_version,
                    "judge": verifier.judge_identity,
                    "reward_mode": plan.reward_mode,
                    "final_reward": final_reward,
                },
            )
            log_event(ctx.layout, ctx.round, ctx.phase, f"verify {shard.name}: {len(rewards)} rewards")
        outputs.append(out)
        metas.append(reward_meta(out))
    valid = sum(m["valid"] for m in metas)
    means = [m["reward_mean"] * m["valid"] for m in metas if m["reward_mean"] is not None]
    invalid: dict[str, int] = {}
    for m in metas:
        for reason, n in m["invalid_reasons"].items():
            invalid[reason] = invalid.get(reason, 0) + n
    return PhaseResult(
        outputs=outputs,
        inputs=[*shards, ctx.layout.plan(ctx.round)],
        counts={
            "rewards": sum(m["rewards"] for m in metas),
            "valid": valid,
            "reward_mean": (sum(means) / valid) if valid else 0.0,
            "shards": len(outputs),
        },
        extra={
            "reward_version": ctx.config.verify.reward_version,
            "judge": verifier.judge_identity,
            "reward_mode": plan.reward_mode,
            "final_reward": final_reward,
            "invalid_reasons": invalid,
        },
    )


VERIFY = PhaseSpec(
    "verify",
    run_verify,
    reads=lambda L, r: (L.plan(r), L.round(r).shard("rollout", 0).rollouts, first_bank(L).states_dir),
    writes=lambda L, r: tuple(
        Maybe(path, "not with grpo.online_record off")
        for path in (L.round(r).shard("verify", 0).rewards, L.round(r).shard("verify", 0).done)
    ),
    resources="verify",
)
