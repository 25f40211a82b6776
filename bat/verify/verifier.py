"""Verify one rollout: trusted evidence view -> the benchmark's own grader -> optional judge -> reward.

Reward and evaluation cannot drift: item verdicts, evidence and stage formulas come from
`bat.benchmark` (the same `grade` the held-out evaluation uses); this module only restricts the
workspace to files the execution records account for, sends judgment items to the LLM judge when one
is configured, and applies Eq. 4 (stage rows) or the E2E mix. Task truth comes from a grader dir that
is regenerated from the practice seed, never from the rollout's files.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.benchmark import workspace_files as wf
from bat.benchmark.judge_client import JudgeClient, JudgeItem
from bat.schemas.rollout import ItemVerdict, RewardRecord, RolloutRecord
from bat.verify.evidence import trusted_view
from bat.verify.reward import e2e_reward, eta_from, invalid_reward, reward_fields, stage_reward

if TYPE_CHECKING:
    from bat.config.root import BatConfig

E2E = "E2E"
Grade = Callable[..., Any]
"""`grade(workspace, grader_dir, records, *, judge, judge_name) -> RunScore`: the benchmark's grader, config bound."""


@dataclass
class StateTruth:
    """Everything the verifier needs about one Stage Bank state (shared by its K rollouts)."""

    state_id: str
    stage: str
    track: str
    grader_dir: Path
    item_ids: list[str]
    """Rubric item ids c of the row (all stages for E2E)."""
    evidence_ids: list[str]
    """Evidence requirement ids G of the row."""
    prior_records: list[Any] = field(default_factory=list)
    """Execution records of the replayed prefix the state was built from (trusted, bank side)."""


@dataclass
class Verifier:
    """Binds config, grader and judge; `verify(...)` turns a RolloutRecord into a RewardRecord."""

    config: BatConfig
    grade: Grade
    judge: JudgeClient | None = None
    reward_mode: str = "rubric"
    judgment_items: Callable[[str, str], dict[str, str]] | None = None
    """(stage, track) -> {item_id: criterion text} of items that need judgment."""

    @property
    def judge_identity(self) -> str:
        return self.judge.identity if self.judge is not None else "none"

    def _base(self, rec: RolloutRecord) -> dict[str, Any]:
        return reward_fields(rec, self.config.verify.reward_version, self.judge_identity)

    def invalid(self, rec: RolloutRecord, reason: str, **extra: Any) -> RewardRecord:
        return invalid_reward(self._base(rec), reason, **extra)

    def verify(
        self, rec: RolloutRecord, shard_dir: Path, truth: StateTruth, records: Sequence[Any], workdir: Path
    ) -> RewardRecord:
        """Reward of one rollout; `records` are its execution records (timings merged back)."""
        if not rec.valid:
            return self.invalid(rec, f"rollout invalid: {rec.invalid_reason}")
        if rec.evidence_dir is None:
            return self.invalid(rec, "rollout kept no workspace evidence (rollout.keep_evidence=false)")
        view = workdir / "trusted"
        shutil.rmtree(view, ignore_errors=True)
        trust = trusted_view(
            shard_dir / rec.evidence_dir, rec.initial_files, rec.turns, view, self.config.verify.artifact_owners
        )
        judged, judge_fn, judge_error = self._prejudge(truth, rec, view)
        score = self.grade(
            view,
            truth.grader_dir,
            [*truth.prior_records, *records],
            judge=judge_fn,
            judge_name=self.judge_identity if judge_fn else "",
        )
        items = self._items(score, truth, judged, judge_error)
        extra = {
            "items": list(items.values()),
            "breach": bool(score.breach),
            "task_score": score.task,
            "dropped_files": trust.dropped,
        }
        nulls = sorted(i for i, v in items.items() if v.verdict is None)
        if nulls:
            why = "; ".join(sorted({v.detail for v in items.values() if v.verdict is None}))
            return self.invalid(rec, f"null verdicts {nulls}: {why}"[:500], **extra)
        if self.reward_mode == "final":
            which = self.config.verify.final_reward
            final = score.task if which == "task" else score.overall
            if final is None:
                return self.invalid(rec, f"final {which} score is null: {score.null_reasons}", **extra)
            return RewardRecord(
                **self._base(rec), stage_scores=dict(score.stages), reward=float(final), valid=True, **extra
            )
        if score.breach:
            return RewardRecord(**self._base(rec), reward=0.0, eta=0.0, valid=True, **extra)
        if truth.stage == E2E:
            return self._e2e(rec, score, truth, extra)
        evidence = self._stage_evidence(view, truth, records, score, judge_fn)
        eta = eta_from(evidence, truth.evidence_ids) if truth.evidence_ids else score.eta.get(truth.stage, 1.0)
        reward = stage_reward({i: v.verdict for i, v in items.items()}, eta)
        if reward is None:
            return self.invalid(rec, f"no applicable rubric item of {truth.stage} could be scored", **extra)
        return RewardRecord(
            **self._base(rec),
            evidence=evidence,
            eta=eta,
            stage_scores={truth.stage: reward},
            reward=reward,
            valid=True,
            **extra,
        )

    def _stage_evidence(
        self, view: Path, truth: StateTruth, records: Sequence[Any], score: Any, judge_fn: Any
    ) -> dict[str, bool]:
        """The row stage's evidence: from the whole trajectory's grade `score`, or (`verify.stage_evidence:
        rollout` with a non-empty prefix) from a grade of the rollout's own records on the same workspace view."""
        if self.config.verify.stage_evidence == "trajectory" or not truth.prior_records:
            return dict(score.evidence.get(truth.stage, {}))
        own = self.grade(
            view, truth.grader_dir, list(records), judge=judge_fn, judge_name=self.judge_identity if judge_fn else ""
        )
        return dict(own.evidence.get(truth.stage, {}))

    def _prejudge(self, truth: StateTruth, rec: RolloutRecord, view: Path) -> tuple[set[str], Any, str | None]:
        """Ask the judge once for every judgment item in scope; returns (ids, grader hook, error)."""
        if self.judgment_items is None:
            return set(), None, None
        stages = [s.key for s in self.config.stages] if truth.stage == E2E else [truth.stage]
        texts: dict[str, str] = {}
        for stage in stages:
            texts.update(self.judgment_items(stage, truth.track))
        wanted = [JudgeItem(i, t) for i, t in texts.items() if truth.stage == E2E or i in set(truth.item_ids)]
        if not wanted or self.judge is None:
            return {w.id for w in wanted}, None, None
        result = self.judge.judge(wanted, judge_context(rec, view))
        return {w.id for w in wanted}, (lambda item, _plan: result.verdicts.get(item.id)), result.error

    def _items(
        self, score: Any, truth: StateTruth, judged: set[str], judge_error: str | None
    ) -> dict[str, ItemVerdict]:
        """The row's item verdicts from the grader (items absent from the score are not applicable)."""
        stages = list(score.items) if truth.stage == E2E else [truth.stage]
        wanted = set(truth.item_ids)
        out: dict[str, ItemVerdict] = {}
        for stage in stages:
            for item_id, verdict in score.items.get(stage, {}).items():
                if truth.stage != E2E and item_id not in wanted:
                    continue
                source = ("judge" if self.judge is not None else "proxy") if item_id in judged else "grader"
                detail = ""
                if verdict is None:
                    detail = f"judge failed: {judge_error}" if source == "judge" else "; ".join(score.null_reasons)
                out[item_id] = ItemVerdict(item_id=item_id, verdict=verdict, source=source, detail=detail)
        return out

    def _e2e(self, rec: RolloutRecord, score: Any, truth: StateTruth, extra: dict[str, Any]) -> RewardRecord:
        """`verify.e2e_reward`: union_rubric, eta over the union evidence x mean of every item verdict (Eq. 4 over
        Eq. 14's union contract); or stage_mix, w * weighted mean of eta_s * stage score + (1 - w) * task. The
        per-stage eta_s * stage scores are recorded either way."""
        stage_rewards: dict[str, float | None] = {}
        evidence: dict[str, bool] = {}
        for stage, value in score.stages.items():
            ev = score.evidence.get(stage, {})
            evidence.update(ev)
            eta = score.eta.get(stage, 1.0)
            stage_rewards[stage] = None if value is None else eta * value
        eta_all = eta_from(evidence, truth.evidence_ids or list(evidence))
        if self.config.verify.e2e_reward == "union_rubric":
            reward = stage_reward({v.item_id: v.verdict for v in extra["items"]}, eta_all)
        else:
            reward = e2e_reward(
                stage_rewards, score.task, self.config.stages, self.config.verify.e2e_stage_weight, score.not_applicable
            )
        if reward is None:
            return self.invalid(rec, f"E2E reward is null (stages {stage_rewards}, task {score.task})", **extra)
        return RewardRecord(
            **self._base(rec),
            evidence=evidence,
            eta=eta_all,
            stage_scores=stage_rewards,
            reward=reward,
            valid=True,
            **extra,
        )


def judge_context(rec: RolloutRecord, view: Path, max_artifact_chars: int = 2000) -> str:
    """Evidence for the judge: each executed call with its status, plus the trusted view's text artifacts other
    than the task's own files (plan.md)."""
    lines = []
    for turn in rec.turns:
        what = turn.call or turn.invalid or {}
        status = (turn.record or {}).get("ok")
        lines.append(f"[turn {turn.index}] call={what} ok={status} observation={str(turn.observation)[:300]!r}")
    for path in sorted(view.rglob("*.md")):
        rel = path.relative_to(view).as_posix()
        if rel.startswith(f"{wf.TASK_DIR}/"):
            continue
        lines.append(f"[artifact {rel}]\n{path.read_text(errors='replace')[:max_artifact_chars]}")
    return "\n".join(lines)
