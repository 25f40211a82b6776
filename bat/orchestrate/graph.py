"""The phase graph: the phases' own `PhaseSpec`s (function, layout files read and written, resources key), imported
from their packages and listed in the order of `bat.phase.order`.

Slurm dependencies (`afterok`), `bat status` columns and the phase I/O table of the docs (`bat phases`,
`bat.orchestrate.phase_table`) derive from it. `orchestrate.phase_overrides` swaps a phase's function for another
`module:function` (test stand-ins); the runner checks declared writes only for the product functions.
"""

from __future__ import annotations

import importlib
from dataclasses import replace
from typing import TYPE_CHECKING

from bat.bank.phase import SYNTHESIZE
from bat.curriculum.phase import ROUTE
from bat.evaluate.phase import EVALUATE, FINAL_TEST
from bat.leakage.phase import SCAN
from bat.online.phase import GRPO
from bat.phase.order import ASYNC_ORDER, BOOTSTRAP_ORDER, FINAL_ORDER, PHASE_NAMES, ROUND_ORDER
from bat.phase.spec import PhaseSpec
from bat.rollout.phase import ROLLOUT
from bat.train.phase import SFT
from bat.verify.phase import VERIFY

if TYPE_CHECKING:
    from bat.config.root import BatConfig
    from bat.phase.context import PhaseFn

__all__ = [
    "ASYNC_ORDER",
    "BOOTSTRAP_ORDER",
    "FINAL_ORDER",
    "PHASES",
    "ROUND_ORDER",
    "PhaseSpec",
    "check_round",
    "is_final_round",
    "load_phase_fn",
    "resolve_table",
    "round_phases",
]


PHASES: dict[str, PhaseSpec] = {
    spec.name: spec for spec in (SYNTHESIZE, SCAN, SFT, ROLLOUT, VERIFY, GRPO, EVALUATE, ROUTE, FINAL_TEST)
}
"""Every product phase, declared at its boundary (`bat/<pkg>/phase.py`), in data-flow order."""

assert tuple(PHASES) == PHASE_NAMES, "the graph table lists the phases of bat.phase.order, in its order"


def is_final_round(config: BatConfig | None, round_index: int) -> bool:
    """True for the last budgeted round of a run that evaluates the untouched test split at the end."""
    return config is not None and round_index == config.run.rounds and config.evaluate.test_split


def round_phases(round_index: int, config: BatConfig | None = None) -> tuple[str, ...]:
    """Phases of round `round_index` in data-flow order (+ `final_test` in the last round when `config` says so)."""
    if round_index < 0:
        raise ValueError(f"round index must be >= 0, got {round_index}")
    order = BOOTSTRAP_ORDER if round_index == 0 else ROUND_ORDER
    return (*order, *FINAL_ORDER) if is_final_round(config, round_index) else order


def resolve_table(config: BatConfig) -> dict[str, PhaseSpec]:
    """The product table with `config.orchestrate.phase_overrides` applied (each override imported here; errors
    name the target, see `load_phase_fn`)."""
    overrides = config.orchestrate.phase_overrides
    return {name: with_target(spec, overrides[name]) if name in overrides else spec for name, spec in PHASES.items()}


def with_target(spec: PhaseSpec, target: str) -> PhaseSpec:
    """`spec` running the function `target` (`module:function`) instead: a stand-in, so the runner neither checks
    its declared writes nor writes the round report after it."""
    if target == spec.target:
        return spec
    return replace(spec, run=load_phase_fn(target), writes_report=False, product=False)


def load_phase_fn(target: str) -> PhaseFn:
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


def check_round(config: BatConfig, round_index: int, phases: tuple[str, ...] | None = None) -> list[str]:
    """Problems that would make a round fail to start (unimportable override functions); [] when fine."""
    overrides = config.orchestrate.phase_overrides
    problems = []
    for name in phases or round_phases(round_index):
        if name not in overrides:
            continue  # a product phase: its function was imported with the graph
        try:
            load_phase_fn(overrides[name])
        except (ImportError, AttributeError, ValueError) as exc:
            problems.append(f"{name}: {exc}")
    return problems
