"""Online GRPO (`grpo.rollouts: online`): every optimizer step rolls out a fresh batch from the current weights,
verifies it and trains on it, inside one training block whose optimizer state carries from step to step.

Reads the block's start checkpoint and an `OnlineSource` (which states each step rolls out, how to open their
environments, how to reward a finished shard); writes, per step, the rollout shard and the reward shard under
`OnlineLayout(root).step(step)`, one `metrics.jsonl` record (true reward by pool, the trained reward when the twin
permutes it, identical groups drawn and left, groups replaced, KL, clip fraction, gradient norm, seconds), step
checkpoints and, once every step is done, the HF export (`bat.train.block`). A resumed block restores its newest
step checkpoint and rolls out again from there (the step folders after it are removed first), so it ends with the
same weights an uninterrupted block would.
"""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bat.config.grpo import GrpoConfig
from bat.online.pass_rate import PassRateFilter, replayed
from bat.online.rewards import identical_groups, mean_by_pool, mean_reward
from bat.rollout.chat import TurnTokens
from bat.rollout.engine import Engine
from bat.rollout.runner import OpenedEnv, StateJob, run_shards
from bat.rollout.shards import read_shard
from bat.rollout.spec import LoopSettings
from bat.schemas.rollout import RewardRecord, RolloutRecord
from bat.seeds import derive_seed
from bat.state.online_layout import OnlineLayout
from bat.state.round_layout import ShardLayout
from bat.train.block import TrainingBlock, open_block
from bat.train.checkpoint import export_hf
from bat.train.common import all_sum, chunks
from bat.train.engine import record_grad_norm
from bat.train.grpo import micro_step, probe_step, step_record
from bat.train.grpo_data import GrpoItem, build_items, collate_items, global_denominator
from bat.train.twin import shuffled
from bat.verify.shards import read_reward_shard, write_reward_shard


@dataclass(frozen=True)
class OnlineSource:
    """What an online block draws from at every step."""

    batch: Callable[[int], list[StateJob]]
    """0-based step -> the states rolled out at that step (K rollouts each, `StateJob.repeats` times)."""
    open_env: Callable[[StateJob, int, Path], OpenedEnv]
    """`run_shards`' opener: (state, k, workdir) -> an environment ready for one rollout."""
    verify: Callable[[Path, Path], list[RewardRecord]]
    """(finished rollout shard dir, scratch dir) -> one RewardRecord per rollout of the shard."""
    engine: Callable[[], Engine]
    """Builds the rollout engine once (on the start checkpoint); the block then installs its current weights."""
    turn_tokens: TurnTokens
    settings: LoopSettings
    k: int
    """Rollouts per state (the GRPO group size)."""
    rollouts_per_step: int
    """The largest number of rollouts one step trains (sizes gradient accumulation)."""
    replacement: Callable[[str, int, int], StateJob | None] | None = None
    """(pool, step, draw) -> another state of that pool for dynamic sampling; None = the pool has none left."""
    stages: Sequence[str] = ()
    """Stage keys for the rollouts' failure breakdown and `grpo.stage_row_credit: own-stage`."""


class _Borrowed:
    """The block's rollout engine handed to `run_shards`, which closes what it is given: closing it is a no-op."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def close(self) -> None:
        return None


@dataclass
class _StepBatch:
    """One step's rollouts and rewards, grown by dynamic sampling."""

    rollouts: list[RolloutRecord] = field(default_factory=list)
    rewards: list[RewardRecord] = field(default_factory=list)

    def drop_groups(self, states: set[str]) -> None:
        self.rollouts = [r for r in self.rollouts if r.state_id not in states]
        self.rewards = [r for r in self.rewards if r.state_id not in states]


@dataclass
class _OnlineSteps:
    """The step function of an online block (`TrainingBlock.run`)."""

    block: TrainingBlock
    source: OnlineSource
    cfg: GrpoConfig
    layout: OnlineLayout
    round_index: int
    rate: PassRateFilter = field(default_factory=lambda: PassRateFilter(0))
    engine: Engine | None = None
    ref: Any = None
    last: dict[str, Any] = field(default_factory=dict)

    # -- rollouts --------------------------------------------------------------------------------------------
    def _install_weights(self, step: int) -> Engine:
        """The rollout engine holding the block's current weights (shared in process where the engine can)."""
        b = self.block
        if self.engine is None:
            self.engine = self.source.engine()
        module = b.engine.module
        if hasattr(self.engine, "share_model"):
            self.engine.share_model(module, f"{b.model_path}@step{step}")
        else:
            export_hf(b.engine, b.tokenizer, self.layout.weights, b.env, dtype=b.dtype, extra={"step": step})
            self.engine.set_weights(self.layout.weights)
        return self.engine

    def _roll(self, engine: Engine, jobs: list[StateJob], step: int, attempt: int) -> _StepBatch:
        """Roll out `jobs` (or reuse the finished shard) and reward them (or reuse the reward shard)."""
        s = self.source
        phase_dir = self.layout.rollout(step, attempt)
        module = self.block.engine.module
        module.eval()
        try:
            run = run_shards(
                phase_dir,
                jobs,
                k=s.k,
                states_per_shard=max(1, len(jobs)),
                run_seed=derive_seed(self.block.seed, "online", step, attempt),
                round_index=self.round_index,
                open_env=s.open_env,
                engine_factory=lambda: _Borrowed(engine),
                turn_tokens=lambda: s.turn_tokens,
                settings=s.settings,
                scratch=self.layout.scratch(step),
                stages=s.stages,
            )
        finally:
            module.train()
        shard = run.shards[0]
        rewards_dir = self.layout.rewards(step, attempt)
        if ShardLayout(rewards_dir).is_done():
            rewards = read_reward_shard(rewards_dir)
        else:
            rewards = s.verify(shard, self.layout.scratch(step) / "verify")
            write_reward_shard(rewards_dir, rewards, {"step": step + 1, "attempt": attempt})
        shutil.rmtree(self.layout.scratch(step), ignore_errors=True)
        return _StepBatch(read_shard(shard), rewards)

    def _draw(self, step: int) -> tuple[_StepBatch, dict[str, int]]:
        """The step's batch after dynamic sampling (a group whose rewards are all equal is replaced by a fresh group
        of another state of its pool, up to `grpo.dynamic_sampling` times), and its counts."""
        engine = self._install_weights(step)
        jobs = self._admitted(self.source.batch(step), step)
        repeats = {j.state_id: j.repeats for j in jobs}
        batch = self._roll(engine, jobs, step, 0)
        self.rate.observe(batch.rewards)
        drawn = identical_groups(batch.rewards)
        replaced, draws = 0, 0
        for attempt in range(1, self.cfg.dynamic_sampling + 1):
            flat = identical_groups(batch.rewards)
            if not flat or self.source.replacement is None:
                break
            pool_of = {r.state_id: r.pool for r in batch.rollouts}
            fresh, out = [], set()
            for state in flat:
                job = self.source.replacement(pool_of[state], step, draws)
                draws += 1
                if job is not None and job.state_id not in repeats and self.rate.allows(job.state_id):
                    fresh.append(StateJob(job.state_id, job.pool, job.stage, job.payload, repeats[state]))
                    repeats[job.state_id] = repeats[state]
                    out.add(state)
            if not fresh:
                break
            extra = self._roll(engine, fresh, step, attempt)
            self.rate.observe(extra.rewards)
            batch.drop_groups(out)
            batch.rollouts += extra.rollouts
            batch.rewards += extra.rewards
            replaced += len(fresh)
        counts = {
            "groups_identical_drawn": len(drawn),
            "groups_replaced": replaced,
            "groups_identical": len(identical_groups(batch.rewards)),
            "states_set_aside_by_pool": self.rate.counts(),
        }
        return batch, counts

    def _admitted(self, jobs: list[StateJob], step: int) -> list[StateJob]:
        """`jobs` with every state the pass-rate filter set aside replaced by another state of its pool that it
        allows (kept as it is when the pool has none left)."""
        out, taken = [], {j.state_id for j in jobs}
        for job in jobs:
            if self.rate.allows(job.state_id) or self.source.replacement is None:
                out.append(job)
                continue
            swap = None
            for draw in range(64):
                other = self.source.replacement(job.pool, step, 1000 + len(out) * 64 + draw)
                if other is not None and other.state_id not in taken and self.rate.allows(other.state_id):
                    swap = StateJob(other.state_id, other.pool, other.stage, other.payload, job.repeats)
                    break
            out.append(swap or job)
            taken.add(out[-1].state_id)
        return out

    # -- the update -------------------------------------------------------------------------------------------
    def _reference(self, at_reference: bool) -> Any:
        """The frozen round-start policy for `kl_reference: checkpoint` with beta > 0 (loaded once it differs)."""
        cfg, b = self.cfg, self.block
        if self.ref is None and cfg.kl_coef > 0 and cfg.kl_reference == "checkpoint" and not at_reference:
            from bat.policy.loader import load_model

            self.ref = load_model(b.model_path, dtype=b.dtype, device=str(b.engine.device)).requires_grad_(False)
        return self.ref

    def _update(self, items: list[GrpoItem], step: int) -> tuple[list[float], float]:
        """`grpo.online_epochs` optimizer updates on `items`; returns the summed micro-step parts and tokens of
        the last update. Under `kl_reference: behavior` the reference is the step's sampler (the weights at the
        step's first update); under `checkpoint`, the block's start checkpoint."""
        import torch

        b, cfg = self.block, self.cfg
        mine = items[b.env.rank :: b.env.world]
        den = global_denominator(items, cfg.loss_agg)
        scale = b.env.world * b.accum / max(den, 1)
        sums = [0.0] * 6
        for epoch in range(cfg.online_epochs):
            behavior_ref = cfg.kl_reference == "behavior"
            at_reference = epoch == 0 and (behavior_ref or step == 0)
            ref = None if behavior_ref else self._reference(at_reference)
            sums = [0.0] * 6
            micro_batches = chunks(mine, b.micro)
            for group in micro_batches:
                part = micro_step(
                    b.engine, ref, collate_items(group, b.tokenizer.pad_token_id), cfg, scale, at_reference=at_reference
                )
                record_grad_norm(b.engine)
                b.engine.step()
                sums = [x + y for x, y in zip(sums, part)]
            for _ in range(b.accum - len(micro_batches)):
                probe_step(b.engine, torch.tensor([items[0].ids[:1]]))
                record_grad_norm(b.engine)
                b.engine.step()
        *sums, tokens = all_sum([*sums, sum(len(i.ids) for i in mine)])
        return sums, tokens

    def __call__(self, step: int, cursor: int) -> tuple[int, dict[str, Any]]:
        """One online step: draw, reward (twin: permute), build the groups' advantages, update; the step's record."""
        cfg = self.cfg
        t0 = time.perf_counter()
        batch, counts = self._draw(step)
        t1 = time.perf_counter()
        trained = (
            shuffled(batch.rewards, derive_seed(self.block.seed, "shuffle", step))
            if cfg.shuffle_rewards
            else batch.rewards
        )
        data = build_items(
            batch.rollouts,
            trained,
            max_seq_len=cfg.max_seq_len,
            normalize_std=cfg.normalize_std,
            adv_eps=cfg.adv_eps,
            own_stage_order=self.source.stages if cfg.stage_row_credit == "own-stage" and self.source.stages else None,
        )
        record: dict[str, Any] = {"step": step + 1}
        if data.items:
            sums, tokens = self._update(data.items, step)
            den = global_denominator(data.items, cfg.loss_agg)
            record = step_record(step + 1, data.items, sums, den, self.block.engine, time.perf_counter() - t1, tokens)
        else:  # nothing trainable (every rollout invalid or untrainable): the step moves nothing
            self._update_nothing()
        record.update(
            reward_mean=mean_reward(batch.rewards),
            reward_mean_by_pool=mean_by_pool(batch.rewards),
            reward_mean_trained=mean_reward(trained),
            rollouts_drawn=len(batch.rollouts),
            rollouts_valid=sum(1 for r in batch.rewards if r.valid),
            rollout_seconds=t1 - t0,
            train_seconds=time.perf_counter() - t1,
            epochs=cfg.online_epochs,
            shuffled_rewards=cfg.shuffle_rewards,
            **counts,
            **{k: v for k, v in data.counts.items() if k.startswith("excluded") or k == "trainable"},
        )
        if step + 1 in cfg.export_steps:
            b = self.block
            extra = {"kind": "grpo-step", "steps": step + 1, "start": b.model_path}
            export_hf(b.engine, b.tokenizer, self.layout.export(step + 1), b.env, dtype=b.dtype, extra=extra)
        self.last = record
        return cursor + len(batch.rollouts), record

    def _update_nothing(self) -> None:
        """Keep DeepSpeed's accumulation count on a step with nothing to train: zero-gradient probe micro-steps."""
        import torch

        b = self.block
        for _ in range(b.accum * self.cfg.online_epochs):
            probe_step(b.engine, torch.tensor([[b.tokenizer.pad_token_id or 0]]))
            record_grad_norm(b.engine)
            b.engine.step()


def clear_after(layout: OnlineLayout, done_steps: int) -> None:
    """Remove the step folders of steps a resumed block has not trained (0-based index >= `done_steps` + 1 are
    rolled out again from the restored weights; the folder of step `done_steps` was drawn from exactly those)."""
    for folder in layout.steps_done():
        if int(folder.name.split("_")[-1]) > done_steps:
            shutil.rmtree(folder, ignore_errors=True)


def train_online(
    model_path: str | Path,
    source: OnlineSource,
    cfg: GrpoConfig,
    *,
    seed: int,
    round_index: int,
    root: str | Path,
    ckpt_root: str | Path,
    export_dir: str | Path,
    metrics_path: str | Path,
    stop_after: int | None = None,
    dtype: str = "float32",
    carry_from: str | Path | None = None,
) -> dict[str, Any]:
    """Run (or resume) an online block of `cfg.steps` steps from `model_path`; returns the block summary.

    Reads `model_path` and the step checkpoints under `ckpt_root`; writes the step folders under `root`
    (`OnlineLayout`), step checkpoints, `metrics_path`, the export at `export_dir` (`bat.train.block`) and, after each
    step of `cfg.export_steps`, an export at `OnlineLayout(root).export(step)`."""
    micro = cfg.deepspeed.micro_batch_per_rank
    block = open_block(
        model_path,
        cfg,
        kind="grpo",
        seed=seed,
        dtype=dtype,
        ckpt_root=ckpt_root,
        metrics_path=metrics_path,
        accum=lambda world: max(1, math.ceil(math.ceil(source.rollouts_per_step / world) / micro)),
        carry_from=carry_from,
    )
    layout = OnlineLayout(Path(root))
    clear_after(layout, block.step)
    rate = replayed(cfg.pass_rate_filter, layout, block.step)
    steps = _OnlineSteps(block, source, cfg, layout, round_index, rate)
    try:
        done = block.run(
            steps,
            stop_after=stop_after,
            export_dir=export_dir,
            meta={"start": str(model_path), "rollouts": "online"},
            export_extra={"start": str(model_path), "rollouts": "online"},
        )
    finally:
        if steps.engine is not None and not hasattr(steps.engine, "share_model"):
            steps.engine.close()
        shutil.rmtree(layout.scratch_root, ignore_errors=True)
    return block.summary(done, {"last": steps.last}, {})
