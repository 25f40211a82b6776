"""The experiment file: base config, common overrides, seeds, arms (as `--set`-style overrides), where to write.

Reads: the experiment YAML and the base config it names. Writes nothing.
Relative paths in the file (base_config, state_dir, out_dir) resolve against the current working directory,
like every other `bat` command's `--config`/`--state`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from bat.state.experiment_layout import SHARED_STATE_DIR_NAME

if TYPE_CHECKING:
    from bat.config.root import BatConfig

SHARED_NAME = SHARED_STATE_DIR_NAME
"""Directory name of the per-seed shared bootstrap state (reserved; not a valid arm name)."""
ARM_PREFIXES = ("curriculum.", "grpo.shuffle_rewards")
"""Arm overrides may only change the curriculum (arm, pools, rho, gate, fallback) and whether the arm is a
shuffled-reward twin (`grpo.shuffle_rewards`): everything else is shared."""
BUDGET_KEYS = ("curriculum.batch_size", "curriculum.batches_per_round", "curriculum.exhausted")
"""Curriculum keys that set the training budget: common to every arm, never per-arm."""
FORCED = {"evaluate.final_eval": "never"}
"""Set for every arm: the end-of-run evaluation is the `final_test` phase on the retained best."""


class ExperimentError(ValueError):
    """An experiment file that cannot be used; the message names the field and lists what is valid."""


class ArmSpec(BaseModel):
    """One arm: a name, a kind and the overrides that make it differ from the others."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    """Arm name (state sub-directory and table row)."""
    kind: Literal["base", "trained"] = "trained"
    """`base`: evaluate the untrained base model only; `trained`: round 0 shared, then the driver runs the arm."""
    overrides: tuple[str, ...] = ()
    """`dotted.key=value` overrides under `curriculum.` (e.g. `curriculum.arm=grpo`, `curriculum.pools=[S-mix, E2E]`)."""

    @model_validator(mode="after")
    def _check(self) -> ArmSpec:
        if self.kind == "base" and self.overrides:
            raise ValueError(f"arm {self.name!r}: a base arm takes no overrides (it evaluates the untrained model)")
        for text in self.overrides:
            key = text.split("=", 1)[0].strip()
            if "=" not in text or not key.startswith(ARM_PREFIXES):
                raise ValueError(
                    f"arm {self.name!r}: override {text!r} must be KEY=VALUE with KEY under "
                    f"{list(ARM_PREFIXES)}; put shared settings in the experiment's `overrides`"
                )
            if key in BUDGET_KEYS:
                raise ValueError(
                    f"arm {self.name!r}: {key} sets the training budget and must be the same for every "
                    f"arm; set it in the experiment's `overrides` (budget keys: {list(BUDGET_KEYS)})"
                )
        return self


class ExperimentSpec(BaseModel):
    """`configs/experiments/*.yaml`: which arms, which seeds, on which base config, written where."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    """Experiment name (run names become `<name>-<arm>-s<seed>`)."""
    base_config: Path
    """The `bat run` config every arm starts from (e.g. configs/local.yaml)."""
    overrides: tuple[str, ...] = ()
    """`dotted.key=value` overrides applied to every arm and to the shared bootstrap (budget, model, suite)."""
    seeds: tuple[int, ...] = Field(min_length=1)
    """Run seeds; each seed has one state dir per arm (and its own bank + SFT checkpoint unless `bootstrap_seed`)."""
    bootstrap_seed: int | None = Field(None, ge=0)
    """None: every seed builds its own bootstrap (bank + SFT checkpoint). An integer: one bootstrap, built with this
    run seed, serves every seed, so the seeds vary only RL sampling and the routing that follows (a cheaper design
    whose seed spread leaves out bank/SFT variation; say so when reporting). Evaluation sampling seeds derive from
    the experiment's held-out secret, the same for every arm and seed, so an untrained arm's seeds reproduce each
    other exactly."""
    arms: tuple[ArmSpec, ...] = Field(min_length=1)
    """Arms in table order."""
    state_dir: Path = Path("state/experiments")
    """Parent of the per-seed state dirs (`<state_dir>/<name>/seed_<s>/<arm>/`)."""
    secret_file: Path | None = None
    """A committed copy of the experiment's held-out secret (64 hex characters, relative paths from the repository
    root). When given, every run of the experiment is evaluated on the suite it derives, on any machine; it must lie
    outside what sandboxes mount (the Python environment and the `bat` package), e.g. under `docs/results/`. None:
    the secret is created once under `state_dir` and lives only on that disk."""
    out_dir: Path = Path("docs/results")
    """Where README.md, results.json and the curve plots are written."""
    report_split: Literal["final", "test"] = "final"
    """Split of the end-of-run evaluation shown in the table (`test` needs `evaluate.test_split: true`)."""
    reference_arm: str | None = None
    """Arm the others are compared against (paired per-track deltas); default: the first arm named `bicurl`, else
    the last arm."""
    twin_dir: Path | None = None
    """An arm-versus-twin study's folder (e.g. docs/results/rl_teaches): its committed units (`bat experiment
    --twin-unit`), `results.json` and `curves.png` (`--twin-report`). None: the experiment is not such a study."""
    wide_final_repeats: int | None = Field(None, ge=2, le=1000)
    """None: arm x seeds are widened only by `bat experiment --wide-final N`. An integer N: each arm x seed this
    driver finishes is widened at once to N final runs per track (`bat.experiment.wide`), while its retained
    checkpoint is still on the disk that trained it (checkpoints are not committed); a failed widening is reported
    and does not stop the other arms."""

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, seeds: tuple[int, ...]) -> tuple[int, ...]:
        if len(set(seeds)) != len(seeds) or any(s < 0 for s in seeds):
            raise ValueError(f"seeds must be distinct non-negative integers, got {list(seeds)}")
        return seeds

    @model_validator(mode="after")
    def _check(self) -> ExperimentSpec:
        names = [a.name for a in self.arms]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"arm names repeat: {dupes}")
        if self.reference_arm is not None and self.reference_arm not in names:
            raise ValueError(f"reference_arm {self.reference_arm!r} is not an arm; arms: {names}")
        for text in self.overrides:
            key, _, value = text.partition("=")
            if key.strip() in FORCED and yaml.safe_load(value) != FORCED[key.strip()]:
                raise ValueError(
                    f"override {text!r}: the experiment evaluates the retained best with the final_test "
                    f"phase, so {key.strip()} must stay {FORCED[key.strip()]!r}"
                )
        return self

    @property
    def root(self) -> Path:
        """`<state_dir>/<name>`: every state dir of this experiment."""
        return self.state_dir / self.name

    def arm(self, name: str) -> ArmSpec:
        for arm in self.arms:
            if arm.name == name:
                return arm
        raise ExperimentError(f"unknown arm {name!r}; arms: {[a.name for a in self.arms]}")

    @property
    def reference(self) -> str:
        names = [a.name for a in self.arms]
        return self.reference_arm or ("bicurl" if "bicurl" in names else names[-1])


def load_experiment(path: str | Path) -> ExperimentSpec:
    """Read and validate an experiment YAML; every problem names the field (and the valid keys)."""
    p = Path(path)
    if not p.is_file():
        raise ExperimentError(f"experiment file {p} does not exist")
    try:
        data: Any = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ExperimentError(f"{p}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ExperimentError(f"{p}: top level must be a mapping with keys {sorted(ExperimentSpec.model_fields)}")
    try:
        spec = ExperimentSpec.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            where = ".".join(str(x) for x in err["loc"]) or "<root>"
            if err["type"] == "extra_forbidden":
                model = ArmSpec if "arms" in err["loc"] else ExperimentSpec
                lines.append(f"{where}: unknown key; valid keys: {', '.join(sorted(model.model_fields))}")
            else:
                lines.append(f"{where}: {err['msg']}")
        raise ExperimentError(f"{p}: invalid experiment file:\n  " + "\n  ".join(lines)) from None
    if not spec.base_config.is_file():
        raise ExperimentError(
            f"{p}: base_config {spec.base_config} does not exist (relative paths resolve against "
            f"the current directory {Path.cwd()})"
        )
    if spec.secret_file is not None and not spec.secret_file.is_file():
        raise ExperimentError(
            f"{p}: secret_file {spec.secret_file} does not exist; restore it from the repository (it fixes the "
            "experiment's held-out suite) or remove the key to create a new suite"
        )
    for arm in spec.arms:  # fail before anything runs: every arm x seed config must validate
        cfg = arm_config(spec, arm, spec.seeds[0])
        if spec.report_split == "test" and not cfg.evaluate.test_split:
            raise ExperimentError(
                f"{p}: report_split 'test' needs evaluate.test_split=true (add it to `overrides`); "
                "valid report_split values: final, test"
            )
    return spec


def _common(spec: ExperimentSpec, seed: int, run_name: str) -> list[str]:
    forced = [f"{k}={v}" for k, v in FORCED.items()]
    return [*spec.overrides, *forced, f"run.seed={seed}", f"run.name={run_name}"]


def arm_config(spec: ExperimentSpec, arm: ArmSpec | str, seed: int) -> BatConfig:
    """The resolved config of one arm x seed (base config + common overrides + arm overrides + seed)."""
    from bat.config.load import ConfigError, load_config

    arm = spec.arm(arm) if isinstance(arm, str) else arm
    try:
        return load_config(spec.base_config, [*_common(spec, seed, f"{spec.name}-{arm.name}-s{seed}"), *arm.overrides])
    except ConfigError as exc:
        raise ExperimentError(f"arm {arm.name!r} (seed {seed}): {exc}") from exc


def bootstrap_seed_of(spec: ExperimentSpec, seed: int) -> int:
    """The run seed whose shared bootstrap serves `seed` (`seed` itself unless the spec sets `bootstrap_seed`)."""
    return seed if spec.bootstrap_seed is None else spec.bootstrap_seed


def shared_config(spec: ExperimentSpec, seed: int) -> BatConfig:
    """The config of the shared bootstrap serving `seed`: round 0 only (synthesize, scan, sft, evaluate, route)."""
    from bat.config.load import load_config

    boot = bootstrap_seed_of(spec, seed)
    # round 0 only, and no end-of-run final/test evaluation of the bootstrap: the arms evaluate their own retained best
    return load_config(
        spec.base_config,
        [*_common(spec, boot, f"{spec.name}-shared-s{boot}"), "run.rounds=0", "evaluate.test_split=false"],
    )


BUDGET_FIELDS = (
    "run.rounds",
    "curriculum.batch_size",
    "curriculum.batches_per_round",
    "curriculum.exhausted",
    "curriculum.gate",
    "curriculum.fallback",
    "rollout.k",
    "rollout.budgets",
    "rollout.state_context",
    "grpo.steps",
    "grpo.step_batches",
    "grpo.minibatch",
    "grpo.lr",
    "grpo.optimizer",
    "grpo.grad_clip",
    "grpo.loss_agg",
    "grpo.stage_row_credit",
    "verify.final_reward",
    "sft.steps",
    "model",
    "benchmark",
    "evaluate",
)
"""Resolved config fields that must be identical across trained arms (the matched budget)."""

BUDGET_FIELD_DEFAULTS = {
    "grpo.optimizer": "adamw",
    "rollout.state_context": "handoff",
    "grpo.grad_clip": 1.0,
    "grpo.loss_agg": "token-mean",
    "grpo.stage_row_credit": "all-turns",
    "verify.final_reward": "overall",
}
"""Budget fields added after arm x seeds had been recorded, with the value every earlier run ran under: a record
without the field is compared as if it held this value (not stale merely for predating the field)."""


def budget_signature(cfg: BatConfig) -> dict[str, Any]:
    """The matched-budget fields of a resolved config (dotted name -> JSON value)."""
    data = cfg.model_dump(mode="json")
    out: dict[str, Any] = {}
    for dotted in BUDGET_FIELDS:
        node: Any = data
        for part in dotted.split("."):
            node = node[part]
        out[dotted] = node
    return out
