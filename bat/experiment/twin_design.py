"""The shape of an arm-versus-twin study, read from its experiment file: which arm is the shuffled-reward twin of
which, the seeds, the GRPO steps, the probed steps and the study folder (`twin_dir`).

Reads the experiment spec (and each arm's resolved config); writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bat.experiment.spec import ExperimentError, ExperimentSpec, arm_config, bootstrap_seed_of

REFERENCE = "sft"
"""The reference unit's name: the shared bootstrap's SFT export (step 0 of every arm)."""
SHUFFLE_KEY = "grpo.shuffle_rewards"


@dataclass(frozen=True)
class TwinDesign:
    """One study: `arm` and its twin `twin` (the same arm with `grpo.shuffle_rewards`), trained for `steps` GRPO
    steps and probed at `probe_steps` (the last is the final candidate), over `seeds`; the reference (the SFT) is
    the bootstrap of `reference_seeds`."""

    root: Path
    arm: str
    twin: str
    seeds: tuple[int, ...]
    reference_seeds: tuple[int, ...]
    steps: int
    probe_steps: tuple[int, ...]
    final_split_runs: int
    """Held-out E2E runs per final checkpoint (`benchmark.split_repeats.final` x tracks)."""

    @property
    def arms(self) -> tuple[str, str]:
        return self.arm, self.twin


def _without_shuffle(overrides: tuple[str, ...]) -> set[str]:
    return {o.replace(" ", "") for o in overrides if not o.strip().startswith(SHUFFLE_KEY)}


def twin_design(spec: ExperimentSpec) -> TwinDesign:
    """The study of `spec`; ExperimentError (naming what to set) when the file has no `twin_dir`, not exactly one
    twin (a trained arm with `grpo.shuffle_rewards=true`) with one arm of the same other overrides, or more than one
    round."""
    if spec.twin_dir is None:
        raise ExperimentError(
            f"experiment {spec.name!r} has no twin_dir: set it to the study's folder (e.g. docs/results/{spec.name})"
        )
    seed = spec.seeds[0]
    trained = [a for a in spec.arms if a.kind == "trained"]
    twins = [a for a in trained if arm_config(spec, a, seed).grpo.shuffle_rewards]
    arms = [a for a in trained if a not in twins]
    pairs = [(a, t) for t in twins for a in arms if _without_shuffle(a.overrides) == _without_shuffle(t.overrides)]
    if len(pairs) != 1:
        raise ExperimentError(
            f"experiment {spec.name!r}: a twin study needs exactly one arm and its twin (the same overrides plus "
            f"{SHUFFLE_KEY}=true); twins: {[t.name for t in twins]}, arms: {[a.name for a in arms]}, "
            f"pairs: {[(a.name, t.name) for a, t in pairs]}"
        )
    arm, twin = pairs[0]
    cfg = arm_config(spec, arm, seed)
    if cfg.run.rounds != 1:
        raise ExperimentError(
            f"experiment {spec.name!r}: a twin study trains one round (run.rounds=1), not {cfg.run.rounds}"
        )
    steps = cfg.grpo.steps
    return TwinDesign(
        root=Path(spec.twin_dir),
        arm=arm.name,
        twin=twin.name,
        seeds=tuple(spec.seeds),
        reference_seeds=tuple(sorted({bootstrap_seed_of(spec, s) for s in spec.seeds})),
        steps=steps,
        probe_steps=tuple(sorted({s for s in cfg.grpo.export_steps if 0 < s < steps} | {steps})),
        final_split_runs=cfg.benchmark.repeats_for("final") * len(cfg.benchmark.tracks),
    )
