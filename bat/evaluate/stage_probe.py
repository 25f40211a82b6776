"""Build the held-out stage probe: expert trajectories on held-out instances of the probe's own split, replayed to
one executable state per stage (Eq. 11, the Stage Bank's machinery on held-out instances).

The probe split's instances derive from (`benchmark.heldout_seed`, the run's held-out secret, "heldout",
"stage_probe", track, index) exactly as the controller, final and test splits derive from their own labels, so
they are disjoint from those runs and, being held-out instances, from every practice task of the bank. Runs that
share a held-out secret share the probe (an arm and its twin are probed on the same states).

Reads the run's held-out secret and config; writes `heldout/stage_probe/` (`StageProbeLayout`): built once per
run, atomically, `MANIFEST.json` last. A second build with the same knobs is a no-op; with other knobs it is an
error naming both (a built probe is never replaced).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.config.load import ConfigError
from bat.schemas.bank import StateRef
from bat.schemas.stage_probe import ProbeManifest, ProbeState, ProbeTrajectory
from bat.seeds import derive_seed, derive_wide_seed
from bat.state.atomic import atomic_dir, atomic_write_json, read_json
from bat.state.jsonl import write_jsonl
from bat.state.probe_layout import StageProbeLayout

if TYPE_CHECKING:
    from bat.benchmark.secret import HeldoutSecret
    from bat.benchmark.suite import SuiteRun
    from bat.config.root import BatConfig
    from bat.state.layout import RunLayout

PROBE_SPLIT = "stage_probe"
"""The label the probe's held-out instances derive from (beside the suite's controller, final and test)."""
PROBE_TEACHER = "expert"
"""The built-in scripted agent whose trajectories the probe states are replayed from."""


class ProbeMismatchError(ValueError):
    """The run's probe was built with other knobs or another held-out secret than the ones asked for now."""


def probe_tracks(config: BatConfig) -> list[str]:
    """`evaluate.stage_probe.tracks` or every benchmark track; unknown names raise, listing the valid ones."""
    valid = list(config.benchmark.tracks)
    chosen = list(config.evaluate.stage_probe.tracks or valid)
    unknown = [t for t in chosen if t not in valid]
    if unknown:
        raise ConfigError(
            f"evaluate.stage_probe.tracks has unknown tracks {unknown}; valid (benchmark.tracks): {valid}"
        )
    return chosen


def probe_stages(config: BatConfig) -> list[str]:
    """`evaluate.stage_probe.stages` (in stage order) or every configured stage; unknown keys raise."""
    valid = list(config.stage_keys)
    chosen = set(config.evaluate.stage_probe.stages or valid)
    unknown = sorted(chosen - set(valid))
    if unknown:
        raise ConfigError(f"evaluate.stage_probe.stages has unknown stages {unknown}; valid: {valid}")
    return [s for s in valid if s in chosen]


def probe_runs(config: BatConfig, secret: HeldoutSecret) -> list[SuiteRun]:
    """The probe split's runs: `tasks_per_track` held-out instances per probe track under `secret`."""
    from bat.benchmark.suite import SuiteRun, suite_run_id

    seed = config.benchmark.heldout_seed
    return [
        SuiteRun(
            suite_run_id(PROBE_SPLIT, track, r),
            PROBE_SPLIT,
            track,
            r,
            derive_wide_seed(seed, secret.key, "heldout", PROBE_SPLIT, track, r),
            derive_seed(seed, "sampling", PROBE_SPLIT, track, r),
        )
        for track in probe_tracks(config)
        for r in range(config.evaluate.stage_probe.tasks_per_track)
    ]


def probe_knobs(config: BatConfig) -> dict[str, Any]:
    """Everything a probe's states depend on besides the secret (recorded in, and compared with, its manifest)."""
    from bat.benchmark import GENERATOR_VERSION, HARNESS_VERSION, SUITE_VERSION

    return {
        "tracks": probe_tracks(config),
        "stages": probe_stages(config),
        "tasks_per_track": config.evaluate.stage_probe.tasks_per_track,
        "benchmark": config.benchmark.model_dump(mode="json"),
        "stage_config": [s.model_dump(mode="json") for s in config.stages],
        "skills": dict(config.bank.skills),
        "teacher": f"scripted:{PROBE_TEACHER}",
        "versions": [SUITE_VERSION, HARNESS_VERSION, GENERATOR_VERSION],
    }


def probe_state(
    run: SuiteRun, instance: Any, stage: str, trajectory: ProbeTrajectory, prefix: int, manifest: Any, config: BatConfig
) -> ProbeState:
    """The record of the state packed at `states/<run_id>.<stage>`: its opening prompt, c and G are a stage row's
    (`bat.bank.rows`: stage skill, brief, hand-off note; the stage's rubric items and evidence)."""
    from bat.bank.rows import contract_refs, handoff_note
    from bat.bank.skills import stage_skills
    from bat.bank.states import prefixed
    from bat.benchmark import prompts

    order = list(config.stage_keys)
    state_id = f"{run.run_id}.{stage}"
    skill = prompts.skill_text(stage, stage_skills(config), {s.key: s.name for s in config.stages})
    items, evidence = contract_refs([stage], run.track, config.benchmark.contract)
    files = [f.path for f in manifest.files]
    note = handoff_note(stage, order, trajectory.turns[:prefix], files, config.benchmark.max_observation_chars)
    return ProbeState(
        state_id=state_id,
        run_id=run.run_id,
        track=run.track,
        stage=stage,
        instance_seed=run.instance_seed,
        instance_id=instance.instance_id,
        trajectory_id=trajectory.trajectory_id,
        prefix_turns=prefix,
        state=StateRef(
            path=f"states/{state_id}",
            digest=prefixed(manifest.digest),
            files=sum(1 for f in manifest.files if not f.path.endswith("/")),
            bytes=sum(f.size for f in manifest.files),
        ),
        prompt=[prompts.system_message(skill), prompts.user_message(trajectory.brief, note)],
        rubric=items,
        evidence=evidence,
        skill=skill,
    )


def _expert(run: SuiteRun, config: BatConfig, scratch: Path) -> tuple[Any, ProbeTrajectory, dict[str, int]]:
    """The probe instance of `run`, the expert's checked trajectory on it and its stage boundaries (empty when the
    trajectory fails its check: such a run gives no states)."""
    from bat.bank.checks import check_run, state_starts
    from bat.bank.teacher import run_scripted
    from bat.benchmark import suite_instance

    order = list(config.stage_keys)
    instance = suite_instance(run, config)
    teacher = run_scripted(instance, PROBE_TEACHER, scratch / "teacher", config)
    problems = check_run("success", teacher.score, teacher.turns, order)
    trajectory = ProbeTrajectory(
        trajectory_id=f"trj.{run.run_id}",
        run_id=run.run_id,
        track=run.track,
        instance_id=instance.instance_id,
        teacher=teacher.teacher,
        brief=teacher.brief,
        turns=teacher.turns,
        stage_scores=dict(teacher.score.stages),
        task_score=teacher.score.task,
        checked=not problems,
        check_failures=problems,
    )
    wanted = set(probe_stages(config))
    starts = {} if problems else state_starts("success", teacher.turns, teacher.score, order)
    return instance, trajectory, {s: b for s, b in starts.items() if s in wanted}


def probe_digest(knobs: dict[str, Any], secret_fingerprint: str, states: list[ProbeState]) -> str:
    """sha256 over the knobs, the secret's fingerprint and every state's id and package digest."""
    payload = {
        "knobs": knobs,
        "secret": secret_fingerprint,
        "states": [[s.state_id, s.state.digest] for s in states],
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()


def _fill(tmp: Path, config: BatConfig, secret: HeldoutSecret, knobs: dict[str, Any]) -> ProbeManifest:
    """Run the expert on every probe instance and pack its states into the build folder `tmp`."""
    from bat.bank.replay import replay_and_pack

    files = StageProbeLayout(tmp, tmp / "unused")
    order = list(config.stage_keys)
    trajectories, states, skipped = [], [], {}
    runs = probe_runs(config, secret)
    for run in runs:
        scratch = tmp / "scratch" / run.run_id
        instance, trajectory, starts = _expert(run, config, scratch)
        trajectories.append(trajectory)
        if not trajectory.checked:
            skipped[run.run_id] = list(trajectory.check_failures)
            continue
        ids = {s: f"{run.run_id}.{s}" for s in starts}
        meta = {s: {"state_id": ids[s], "stage": s, "track": run.track, "probe": PROBE_SPLIT} for s in starts}
        dests = {s: files.state(ids[s]) for s in starts}
        packed = replay_and_pack(instance, trajectory.turns, starts, scratch / "replay", config, dests, meta)
        for stage in sorted(starts, key=order.index):
            states.append(probe_state(run, instance, stage, trajectory, starts[stage], packed[stage], config))
        shutil.rmtree(scratch, ignore_errors=True)
    shutil.rmtree(tmp / "scratch", ignore_errors=True)
    write_jsonl(files.trajectories, trajectories)
    write_jsonl(files.states, states)
    from bat.benchmark import HARNESS_VERSION, SUITE_VERSION

    manifest = ProbeManifest(
        digest=probe_digest(knobs, secret.fingerprint, states),
        secret_fingerprint=secret.fingerprint,
        suite_version=SUITE_VERSION,
        harness_version=HARNESS_VERSION,
        knobs=knobs,
        runs=[r.run_id for r in runs],
        states_by_stage={s: sum(1 for x in states if x.stage == s) for s in probe_stages(config)},
        skipped=skipped,
    )
    atomic_write_json(files.manifest, manifest.model_dump(mode="json"))
    return manifest


def read_manifest(probe: StageProbeLayout) -> ProbeManifest | None:
    """The probe's manifest, or None when the probe has not been built."""
    return ProbeManifest.model_validate(read_json(probe.manifest)) if probe.manifest.is_file() else None


def build_probe(config: BatConfig, layout: RunLayout) -> tuple[ProbeManifest, bool]:
    """The run's probe, built now when absent (True) or the existing one (False) when its knobs and secret match
    `config` and the run's secret; otherwise `ProbeMismatchError` naming what differs. The probe is built from the
    built-in benchmark's held-out instances: another benchmark raises ValueError saying so."""
    from bat.benchmark import run_secret

    if config.benchmark.name != "builtin":
        raise ValueError(
            f"benchmark.name {config.benchmark.name!r}: the held-out stage probe is built on the built-in benchmark "
            "only; score this benchmark per stage with `bat evaluate run` (its controller split's stage scores)"
        )

    secret = run_secret(layout)
    knobs = probe_knobs(config)
    probe = layout.stage_probe
    existing = read_manifest(probe)
    if existing is not None:
        changed = sorted(k for k in set(knobs) | set(existing.knobs) if knobs.get(k) != existing.knobs.get(k))
        if existing.secret_fingerprint != secret.fingerprint:
            changed.append("held-out secret")
        if changed:
            raise ProbeMismatchError(
                f"{probe.manifest}: this run's stage probe was built with other {', '.join(changed)}; a probe is "
                "built once per run so its scores stay comparable: keep the config it was built with, or score "
                "into another run directory"
            )
        return existing, False
    if probe.root.exists():
        raise ProbeMismatchError(
            f"{probe.root} exists without its {probe.manifest.name} (a damaged probe); move it aside to rebuild"
        )
    with atomic_dir(probe.root) as tmp:
        manifest = _fill(tmp, config, secret, knobs)
    return manifest, True
