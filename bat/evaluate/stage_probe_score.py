"""Score one checkpoint on the held-out stage probe: K rollouts per probe state, opened as stage rows open
(`rollout.state_context`), ended at the stage exit, rewarded by the stage rubric through the training verifier
with the grader side rebuilt from the held-out instance; aggregated per stage with the state as the unit.

Reads the probe (`heldout/stage_probe/`: manifest, states, trajectories, packages) and the checkpoint; writes the
raw rollouts and rewards under `heldout/stage_probe/scores/<label>/` and the aggregate `stage_probe/<label>.json`
(`StageProbeScore`, numbers only). Sampling seeds derive from (run seed, "stage_probe", state, k) through
`bat.seeds.derive_seed`, so two checkpoints are scored on the same draws and one checkpoint scored twice gives the
same numbers. A finished score is never overwritten; an interrupted one resumes from its finished shards.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.evaluate.aggregate import half_width
from bat.evaluate.stage_probe import PROBE_SPLIT, read_manifest
from bat.rollout.runner import OpenedEnv, StateJob, rollout_id
from bat.schemas.rollout import RewardRecord, RolloutRecord
from bat.schemas.stage_probe import ProbeManifest, ProbeState, ProbeTrajectory, StageProbeCell, StageProbeScore
from bat.seeds import derive_seed
from bat.state.atomic import atomic_write_json, read_json
from bat.state.jsonl import read_jsonl
from bat.state.probe_layout import StageProbeLayout

if TYPE_CHECKING:
    from bat.config.root import BatConfig
    from bat.rollout.chat import TurnTokens
    from bat.rollout.engine import Engine
    from bat.state.layout import RunLayout

ROUND = 0
"""The round index probe rollouts are filed under (they belong to no training round)."""
SHARD = 0
"""All of one scoring's rollouts form one shard, so their seeds do not depend on a sharding knob."""


@dataclass(frozen=True)
class Probe:
    """A built probe: its files, manifest, states (build order) and the expert trajectories they came from."""

    files: StageProbeLayout
    manifest: ProbeManifest
    states: list[ProbeState]
    trajectories: dict[str, ProbeTrajectory]

    def scripts(self, k: int) -> dict[str, list[str]]:
        """Rollout id -> the expert turns after each state's prefix (`ExpertReplayEngine`'s scripts)."""
        out = {}
        for state in self.states:
            rest = [t.response for t in self.trajectories[state.trajectory_id].turns[state.prefix_turns :]]
            for kk in range(k):
                out[rollout_id(ROUND, SHARD, state.state_id, kk)] = rest
        return out


def load_probe(layout: RunLayout) -> Probe:
    """The run's built probe; FileNotFoundError naming the manifest when it has not been built."""
    files = layout.stage_probe
    manifest = read_manifest(files)
    if manifest is None:
        raise FileNotFoundError(f"{files.manifest} does not exist: the run's stage probe has not been built")
    trajectories = {t.trajectory_id: t for t in read_jsonl(files.trajectories, ProbeTrajectory)}
    return Probe(files, manifest, read_jsonl(files.states, ProbeState), trajectories)


def probe_instance(state: ProbeState, config: BatConfig) -> Any:
    """The held-out instance a probe state came from (rebuilt from its secret-derived seed)."""
    from bat.benchmark import generate_instance

    return generate_instance(state.track, "heldout", state.instance_seed, config=config.benchmark)


def opening(probe: Probe, state: ProbeState, config: BatConfig) -> list[dict[str, Any]]:
    """The messages a probe rollout opens with, as a stage row's (`bat.rollout.envs.opening_messages`): the stored
    prompt, or under `rollout.state_context: history` the expert prefix as assistant/tool turns after the system
    turn (every stage skill when `bank.sft_context` is `agent`) and the brief."""
    from bat.bank.rows import agent_skill
    from bat.benchmark import prompts

    if config.rollout.state_context != "history" or state.prefix_turns == 0:
        return prompts.to_dicts(state.prompt)
    trajectory = probe.trajectories[state.trajectory_id]
    skill = agent_skill(config) if config.bank.sft_context == "agent" else state.skill
    return prompts.to_dicts(
        [
            prompts.system_message(skill),
            prompts.user_message(trajectory.brief),
            *prompts.history_messages(trajectory.turns[: state.prefix_turns]),
        ]
    )


def grader_dir(state: ProbeState, config: BatConfig, workdir: Path) -> Path:
    """The held-out instance's grader side under `workdir/grader` (outside every workspace)."""
    from bat.benchmark import materialize

    grader = Path(workdir) / "grader"
    materialize(probe_instance(state, config), Path(workdir) / "_instance_ws", grader)
    return grader


def probe_opener(probe: Probe, config: BatConfig) -> Callable[[StateJob, int, Path], OpenedEnv]:
    """`run_shards`' opener for probe states: a fresh, digest-checked workspace from the state package, the grader
    side rebuilt from the held-out instance, the prefix records, the opening and the stage exit check."""
    from bat.bank.states import materialize
    from bat.benchmark.bank_side import open_instance
    from bat.rollout.envs import prior_records, stage_exit_check

    def open_env(job: StateJob, k: int, workdir: Path) -> OpenedEnv:
        state: ProbeState = job.payload
        state_dir = probe.files.root / state.state.path
        workspace = materialize(state_dir, Path(workdir) / "ws")
        grader = grader_dir(state, config, Path(workdir) / "grader_build")
        env = open_instance(None, workspace, grader, config, prior_records(state_dir))
        return OpenedEnv(
            env=env,
            workspace=env.workspace,
            messages=opening(probe, state, config),
            close=getattr(env, "close", None),
            stage_exit=stage_exit_check(env, state, config),  # a probe state has a stage row's rubric and evidence
        )

    return open_env


def verify_rollouts(probe: Probe, shard: Path, config: BatConfig, scratch: Path) -> list[RewardRecord]:
    """Stage-rubric rewards of a finished probe shard through the training verifier (`make_verifier`), one grader
    side per state rebuilt from its held-out instance."""
    from bat.rollout.envs import prior_records
    from bat.rollout.shards import read_shard, read_timings
    from bat.verify.phase import execution_records, make_verifier
    from bat.verify.verifier import StateTruth

    verifier = make_verifier(config, "rubric")
    by_id = {s.state_id: s for s in probe.states}
    timings = read_timings(shard)
    truths: dict[str, StateTruth] = {}
    rewards = []
    for rec in read_shard(shard):
        state = by_id[rec.state_id]
        if rec.state_id not in truths:
            truths[rec.state_id] = StateTruth(
                state_id=state.state_id,
                stage=state.stage,
                track=state.track,
                grader_dir=grader_dir(state, config, scratch / "states" / state.state_id),
                item_ids=[c.id for c in state.rubric],
                evidence_ids=[g.id for g in state.evidence],
                prior_records=prior_records(probe.files.root / state.state.path),
            )
        records = execution_records(rec, timings.get(rec.rollout_id, []))
        rewards.append(
            verifier.verify(rec, shard, truths[rec.state_id], records, scratch / "rollouts" / rec.rollout_id)
        )
    return rewards


def cell(state_means: Sequence[float], n_rollouts: int, n_invalid: int, confidence: float) -> StageProbeCell:
    """One stage's (or the overall) cell from its states' mean rewards (0-1): mean and half-width on 0-100."""
    mean = sum(state_means) / len(state_means) if state_means else None
    hw = half_width(list(state_means), confidence)
    return StageProbeCell(
        mean=None if mean is None else 100.0 * mean,
        half_width=None if hw is None else 100.0 * hw,
        n_states=len(state_means),
        n_rollouts=n_rollouts,
        n_invalid=n_invalid,
    )


def aggregate_probe(
    states: Sequence[ProbeState],
    rewards: Sequence[RewardRecord],
    rollouts: Sequence[RolloutRecord],
    stages: Sequence[str],
    confidence: float,
) -> tuple[dict[str, StageProbeCell], StageProbeCell, dict[str, int]]:
    """Per-stage cells, the overall cell (every state) and the rollouts' end reasons; a state's score is the mean
    of its valid rewards, a state without one is left out of the means and its rollouts counted as invalid."""
    valid: dict[str, list[float]] = {}
    invalid: dict[str, int] = {}
    for r in rewards:
        if r.valid and r.reward is not None:
            valid.setdefault(r.state_id, []).append(float(r.reward))
        else:
            invalid[r.state_id] = invalid.get(r.state_id, 0) + 1
    means = {s: sum(v) / len(v) for s, v in valid.items()}

    def of(ids: list[str]) -> StageProbeCell:
        return cell(
            [means[i] for i in ids if i in means],
            sum(len(valid.get(i, [])) for i in ids),
            sum(invalid.get(i, 0) for i in ids),
            confidence,
        )

    cells = {stage: of([s.state_id for s in states if s.stage == stage]) for stage in stages}
    overall = of([s.state_id for s in states])
    ends: dict[str, int] = {}
    for rec in rollouts:
        ends[rec.end_reason] = ends.get(rec.end_reason, 0) + 1
    return cells, overall, dict(sorted(ends.items()))


def state_means(states: Sequence[ProbeState], rewards: Sequence[RewardRecord]) -> list[float | None]:
    """Each probe state's mean valid reward (0-1), in the probe's state order (None: no valid rollout)."""
    valid: dict[str, list[float]] = {}
    for r in rewards:
        if r.valid and r.reward is not None:
            valid.setdefault(r.state_id, []).append(float(r.reward))
    return [sum(v) / len(v) if (v := valid.get(s.state_id)) else None for s in states]


def probe_settings(config: BatConfig) -> Any:
    """Loop knobs of probe rollouts: the training rounds' (`rollout` section, rubric reward), every stage row ended
    at its stage exit, sampled at `evaluate.stage_probe.temperature` (or `rollout.temperature`)."""
    from bat.benchmark import TOOL_NAMES
    from bat.rollout.phase import loop_settings

    settings = loop_settings(config.rollout, "rubric", list(TOOL_NAMES))
    temperature = config.evaluate.stage_probe.temperature
    return replace(settings, stage_exit=True, temperature=settings.temperature if temperature is None else temperature)


def claim(files: StageProbeLayout, label: str, request: dict[str, Any]) -> None:
    """Record what the scoring under `label` is for, or check that an interrupted one was for the same (its raw
    rollouts are resumed); FileExistsError naming both otherwise."""
    path = files.request(label)
    if path.exists():
        started = read_json(path)
        if started != request:
            raise FileExistsError(
                f"{path}: label {label!r} holds an interrupted probe score of {started}, not {request}; "
                "give another --label"
            )
        return
    atomic_write_json(path, request)


def roll_and_verify(
    probe: Probe,
    config: BatConfig,
    label: str,
    checkpoint: str,
    engine_factory: Callable[[], Engine],
    turn_tokens: Callable[[], TurnTokens],
) -> tuple[list[RolloutRecord], list[RewardRecord]]:
    """The K rollouts of every probe state under `label` and their rewards, resumed from what is finished there."""
    from bat.rollout.runner import run_shards
    from bat.rollout.shards import read_shard
    from bat.state.round_layout import ShardLayout
    from bat.verify.shards import read_reward_shard, write_reward_shard

    files = probe.files
    jobs = [StateJob(s.state_id, pool=s.stage, stage=s.stage, payload=s) for s in probe.states]
    run = run_shards(
        files.rollouts(label),
        jobs,
        k=config.evaluate.stage_probe.k,
        states_per_shard=max(1, len(jobs)),
        run_seed=derive_seed(config.run.seed, PROBE_SPLIT),
        round_index=ROUND,
        open_env=probe_opener(probe, config),
        engine_factory=engine_factory,
        turn_tokens=turn_tokens,
        settings=probe_settings(config),
        scratch=files.scratch(label) / "rollout",
        keep_evidence=True,
        stages=config.stage_keys,
    )
    rollouts = [r for shard in run.shards for r in read_shard(shard)]
    rewards_dir = files.rewards(label)
    if ShardLayout(rewards_dir).is_done():
        rewards = read_reward_shard(rewards_dir)
    else:
        rewards = [r for shard in run.shards for r in verify_rollouts(probe, shard, config, files.scratch(label))]
        write_reward_shard(rewards_dir, rewards, {"label": label, "checkpoint": checkpoint})
    shutil.rmtree(files.scratch(label), ignore_errors=True)
    return rollouts, rewards


def score_probe(
    config: BatConfig,
    layout: RunLayout,
    *,
    label: str,
    checkpoint: str,
    checkpoint_digest: str,
    engine_factory: Callable[[], Engine],
    turn_tokens: Callable[[], TurnTokens],
    config_hash: str = "",
) -> StageProbeScore:
    """Score the engine `engine_factory` builds (named `checkpoint`) on the run's probe and write the aggregate at
    `layout.stage_probe.score(label)`; FileExistsError when that score already exists."""
    from bat.phase.guard import assert_outside_heldout

    probe = load_probe(layout)
    out = probe.files.score(label)
    assert_outside_heldout(layout, out)  # only the aggregate leaves the held-out side
    if out.exists():
        raise FileExistsError(f"{out} exists: a finished probe score is never overwritten; choose another --label")
    k = config.evaluate.stage_probe.k
    settings = probe_settings(config)
    claim(probe.files, label, {"checkpoint_digest": checkpoint_digest, "k": k, "temperature": settings.temperature})
    rollouts, rewards = roll_and_verify(probe, config, label, checkpoint, engine_factory, turn_tokens)
    cells, overall, ends = aggregate_probe(
        probe.states, rewards, rollouts, list(probe.manifest.states_by_stage), config.evaluate.confidence
    )
    score = StageProbeScore(
        label=label,
        checkpoint=checkpoint,
        checkpoint_digest=checkpoint_digest,
        probe_digest=probe.manifest.digest,
        k=k,
        temperature=settings.temperature,
        confidence=config.evaluate.confidence,
        config_hash=config_hash,
        stages=cells,
        overall=overall,
        end_reasons=ends,
        state_means=state_means(probe.states, rewards),
    )
    atomic_write_json(out, score.model_dump(mode="json"))
    return score


def probe_table(score: StageProbeScore) -> str:
    """The per-stage table of a probe score: mean reward x100 +- half-width, states, rollouts, invalid rollouts."""

    def line(name: str, c: StageProbeCell) -> str:
        mean = "-" if c.mean is None else f"{c.mean:5.1f}"
        hw = "" if c.half_width is None else f" +- {c.half_width:4.1f}"
        return f"  {name:8s} {mean}{hw:9s}  {c.n_states:3d} states  {c.n_rollouts:4d} rollouts  {c.n_invalid} invalid"

    head = (
        f"stage probe {score.label}: {score.checkpoint} (K={score.k}, temperature {score.temperature}, "
        f"{round(100 * score.confidence)}% intervals over state means, probe {score.probe_digest[:12]})"
    )
    rows = [line(stage, c) for stage, c in score.stages.items()]
    ends = ", ".join(f"{k} {v}" for k, v in score.end_reasons.items())
    return "\n".join([head, *rows, line("overall", score.overall), f"  ended: {ends}"])


def read_scores(layout: RunLayout) -> dict[str, StageProbeScore]:
    """Every finished probe score of the run by label (the aggregates only: what a curve of the probe plots)."""
    files = layout.stage_probe
    return {label: StageProbeScore.model_validate_json(files.score(label).read_text()) for label in files.labels()}
