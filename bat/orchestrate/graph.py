"""The phase graph: ONE table of phase -> phase function, what it reads/writes, its resources key.

Slurm dependencies (`afterok`), the round script's order and `bat status` columns derive from it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from bat.config.orchestrate import PHASE_NAMES

if TYPE_CHECKING:
    from bat.config.root import BatConfig
    from bat.orchestrate.context import PhaseFn


@dataclass(frozen=True)
class PhaseSpec:
    """One row of the table."""

    name: str
    target: str
    """`module:function` of the phase function `run(ctx) -> PhaseResult`."""
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    resources: str
    """Key into `config.orchestrate.resources`."""


PHASES: dict[str, PhaseSpec] = {
    spec.name: spec
    for spec in (
        PhaseSpec("synthesize", "bat.bank.phase:synthesize", ("config", "bank seed space"),
                  ("bank/vNNNN/ tasks, teacher trajectories, SFT rows, RL rows, states, MANIFEST",), "synthesize"),
        PhaseSpec("scan", "bat.leakage.phase:scan", ("bank/vNNNN", "held-out fingerprint index"),
                  ("bank/vNNNN/leakage.json", "bank/vNNNN/ADMITTED"), "scan"),
        PhaseSpec("sft", "bat.train.phase:sft", ("admitted SFT rows", "base model"),
                  ("checkpoints/sft/",), "sft"),
        PhaseSpec("rollout", "bat.rollout.phase:rollout", ("round_NN/plan.json", "bank rows", "start checkpoint"),
                  ("round_NN/rollout/ shards",), "rollout"),
        PhaseSpec("verify", "bat.verify.phase:verify", ("round_NN/rollout/", "rubric contracts"),
                  ("round_NN/verify/ reward shards",), "verify"),
        PhaseSpec("grpo", "bat.train.phase:grpo", ("round_NN/rollout/", "round_NN/verify/", "start checkpoint"),
                  ("checkpoints/round_NN/", "round_NN/grpo/ metrics, candidate"), "grpo"),
        PhaseSpec("evaluate", "bat.evaluate.phase:evaluate", ("candidate checkpoint", "held-out suite"),
                  ("round_NN/evaluate/ aggregates", "heldout/round_NN/ raw runs"), "evaluate"),
        PhaseSpec("route", "bat.curriculum.phase:route", ("aggregates history", "gate thresholds"),
                  ("round_NN/route/ decision", "round_NN+1/plan.json", "checkpoints/best.json"), "route"),
        PhaseSpec("final_test", "bat.evaluate.phase:final_test", ("checkpoints/best.json", "held-out final + test splits"),
                  ("round_NN/final_test/ aggregates", "heldout/round_NN/ raw runs"), "final_test"),
    )
}

BOOTSTRAP_ORDER = ("synthesize", "scan", "sft", "evaluate", "route")
"""Round 0: build the first bank, cold-start SFT, evaluate it, route."""
ROUND_ORDER = ("rollout", "verify", "grpo", "evaluate", "route")
"""Rounds r >= 1: BiCuRL inner loop then the outer-loop decision."""
ASYNC_ORDER = ("synthesize", "scan")
"""Bank refresh beside a round (CPU resources, off the critical path)."""

assert set(PHASES) == set(PHASE_NAMES), "graph table and config PHASE_NAMES disagree"


FINAL_ORDER = ("final_test",)
"""After the last round's route: the retained best on the untouched final + test splits, once per run."""


def is_final_round(config: "BatConfig | None", round_index: int) -> bool:
    """True for the last budgeted round of a run that evaluates the untouched test split at the end."""
    return config is not None and round_index == config.run.rounds and config.evaluate.test_split


def round_phases(round_index: int, config: "BatConfig | None" = None) -> tuple[str, ...]:
    """Phases of round `round_index` in data-flow order (+ `final_test` in the last round when `config` says so)."""
    if round_index < 0:
        raise ValueError(f"round index must be >= 0, got {round_index}")
    order = BOOTSTRAP_ORDER if round_index == 0 else ROUND_ORDER
    return (*order, *FINAL_ORDER) if is_final_round(config, round_index) else order


def resolve_table(config: "BatConfig") -> dict[str, PhaseSpec]:
    """The product table with `config.orchestrate.phase_overrides` applied."""
    overrides = config.orchestrate.phase_overrides
    return {name: replace(spec, target=overrides.get(name, spec.target)) for name, spec in PHASES.items()}


def load_phase_fn(target: str) -> "PhaseFn":
    """Import `module:function`; errors name the target and what is wrong."""
    module_name, sep, func_name = target.partition(":")
    if not sep:
        raise ValueError(f"phase target {target!r} is not 'module:function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportError(f"phase target {target!r}: cannot import {module_name!r} ({exc})") from exc
    fn = getattr(module, func_name, None)
    if not callable(fn):
        public = sorted(n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n)))
        raise AttributeError(f"phase target {target!r}: no function {func_name!r}; module has {public}")
    return fn


def check_round(config: "BatConfig", round_index: int, phases: tuple[str, ...] | None = None) -> list[str]:
    """Problems that would make a round fail to start (unimportable phase functions); [] when fine."""
    table = resolve_table(config)
    problems = []
    for name in phases or round_phases(round_index):
        try:
            load_phase_fn(table[name].target)
        except (ImportError, AttributeError, ValueError) as exc:
            problems.append(f"{name}: {exc}")
    return problems
