"""The learning check: does the rollout -> verify -> GRPO path teach at all?

A tiny one-turn task with a graded rubric: the agent is asked to answer with digits only; the rubric has one item per
character position of the answer ("character i is a digit", a missing character fails), so the reward (Eq. 4: eta x
mean of the item verdicts) is the share of digits among the first `ANSWER_CHARS` characters. An untrained policy
writes few digits; a policy that learns from the reward writes almost only digits within a few dozen steps. The
same run with shuffled rewards (`grpo.shuffle_rewards`) must not learn, and a sign, mask or advantage bug makes the
reward fall or stay flat instead of rising.

Everything but the task is the production path: `bat.rollout` (the agent loop, shards, the `hf` engine sharing the
trainer's weights), `bat.verify.Verifier` (trusted evidence view, Eq. 4), `bat.train` (group advantages, the clipped
token loss, DeepSpeed, step checkpoints) through `bat.online.train_online`.

Reads the model folder; writes everything under `work` (`OnlineLayout`, checkpoints, metrics, export).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bat.benchmark.score import RunScore
from bat.config.deepspeed import DeepSpeedConfig
from bat.config.grpo import GrpoConfig
from bat.config.rollout import RolloutBudgets
from bat.online.block import OnlineSource, train_online
from bat.rollout.runner import OpenedEnv, StateJob
from bat.rollout.spec import LoopSettings
from bat.sandbox.record import ExecutionRecord
from bat.schemas.rollout import RewardRecord
from bat.state.jsonl import read_jsonl
from bat.verify.verifier import StateTruth, Verifier

STAGE = "answer"
"""The task's one stage."""
ANSWER_CHARS = 6
"""Rubric items: one per leading character of the answer."""
ITEMS = [f"char_{i}_is_digit" for i in range(ANSWER_CHARS)]
EVIDENCE = "answered"
BRIEF = "Reply with digits only: no words, no spaces, no punctuation."


@dataclass(frozen=True)
class _Reply:
    """What the loop sees after the answer: the record of it, and the end of the episode."""

    text: str
    record: ExecutionRecord
    done: bool = True


class DigitsEnv:
    """The one-turn environment: `reset` gives the brief; `step` records whatever the agent wrote (a well-formed
    call's arguments, or the raw text of any other reply) and ends the episode."""

    def reset(self) -> str:
        return BRIEF

    def step(self, call: dict[str, Any]) -> _Reply:
        text = str(call.get("raw", "")) if call.get("invalid") else str(call.get("arguments", ""))
        record = ExecutionRecord(
            kind="tool", tool="answer", args={"text": text}, stage=STAGE, runtime="inprocess", ok=True, result=text
        )
        return _Reply("Answer recorded.", record)


def grade(view: Path, grader_dir: Path, records: list[Any], *, judge: Any = None, judge_name: str = "") -> RunScore:
    """The task's grader: item i holds when the answer's i-th non-space character is a digit."""
    answer = "".join(str(records[-1].args.get("text", "")).split()) if records else ""
    verdicts = {item: i < len(answer) and answer[i].isdigit() for i, item in enumerate(ITEMS)}
    score = sum(verdicts.values()) / len(ITEMS)
    return RunScore(
        track="digits",
        instance_id="digits",
        stages={STAGE: score},
        items={STAGE: verdicts},
        evidence={STAGE: {EVIDENCE: bool(records)}},
        eta={STAGE: 1.0 if records else 0.0},
        task=score,
        agentic=score,
        overall=score,
    )


def _verifier(work: Path) -> tuple[Verifier, StateTruth]:
    from bat.config import load_config

    grader = work / "grader"
    grader.mkdir(parents=True, exist_ok=True)
    truth = StateTruth("digits", STAGE, "digits", grader, list(ITEMS), [EVIDENCE])
    return Verifier(config=load_config(None), grade=grade), truth


def digits_source(model_dir: Path, work: Path, *, groups: int, k: int, max_new_tokens: int) -> OnlineSource:
    """`groups` states of the digits task per step, K rollouts each, on the `hf` engine; rewarded by the Verifier."""
    from bat.policy.loader import load_tokenizer
    from bat.rollout.chat import TurnTokens
    from bat.rollout.engine_hf import HFEngine
    from bat.rollout.shards import read_shard, read_timings
    from bat.verify.phase import execution_records

    verifier, truth = _verifier(work)

    def batch(step: int) -> list[StateJob]:
        return [StateJob(f"digits-{g}", "S-target", STAGE) for g in range(groups)]

    def open_env(job: StateJob, k: int, workdir: Path) -> OpenedEnv:
        workdir.mkdir(parents=True, exist_ok=True)
        return OpenedEnv(env=DigitsEnv(), workspace=workdir)

    def verify(shard: Path, scratch: Path) -> list[RewardRecord]:
        timings = read_timings(shard)
        return [
            verifier.verify(
                rec,
                shard,
                truth,
                execution_records(rec, timings.get(rec.rollout_id, [])),
                scratch / rec.rollout_id,
            )
            for rec in read_shard(shard)
        ]

    budgets = RolloutBudgets(
        max_assistant_turns=1, max_tool_calls=1, max_new_tokens_per_turn=max_new_tokens, max_context_tokens=256
    )
    return OnlineSource(
        batch=batch,
        open_env=open_env,
        verify=verify,
        engine=lambda: HFEngine(model_dir, max_batch=groups * k),
        turn_tokens=TurnTokens(load_tokenizer(model_dir)),
        settings=LoopSettings(budgets=budgets, temperature=1.0, no_tool_call="observe", tool_workers=1),
        k=k,
        rollouts_per_step=groups * k,
        stages=(STAGE,),
    )


def check_config(steps: int, *, lr: float, shuffle: bool, micro_batch: int) -> GrpoConfig:
    """The GRPO knobs of the check: online, AdamW at `lr`, no KL term, one checkpoint at the end."""
    return GrpoConfig(
        steps=steps,
        lr=lr,
        rollouts="online",
        kl_coef=0.0,
        shuffle_rewards=shuffle,
        checkpoint_every=steps,
        keep_checkpoints=1,
        share_prompts=False,
        deepspeed=DeepSpeedConfig(micro_batch_per_rank=micro_batch),
    )


def run_check(
    model_dir: str | Path,
    work: str | Path,
    *,
    steps: int = 30,
    shuffle: bool = False,
    seed: int = 0,
    groups: int = 4,
    k: int = 8,
    lr: float = 1e-2,
    max_new_tokens: int = 8,
) -> list[float]:
    """Train the digits task online for `steps` steps from `model_dir`; returns the mean true reward of each step's
    rollouts (before that step's update). Writes under `work`."""
    work = Path(work)
    source = digits_source(Path(model_dir), work, groups=groups, k=k, max_new_tokens=max_new_tokens)
    cfg = check_config(steps, lr=lr, shuffle=shuffle, micro_batch=groups * k)
    train_online(
        model_dir,
        source,
        cfg,
        seed=seed,
        round_index=0,
        root=work / "online",
        ckpt_root=work / "ckpt",
        export_dir=work / "export",
        metrics_path=work / "metrics.jsonl",
    )
    return [float(m["reward_mean"]) for m in read_jsonl(work / "metrics.jsonl")]
