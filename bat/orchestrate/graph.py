"""The phase graph: ONE table of phase -> phase function, the layout files it reads and writes, its resources key.

Slurm dependencies (`afterok`), `bat status` columns and the phase I/O table of the docs (`bat phases`,
`bat.orchestrate.phase_table`) derive from it; the order comes from `bat.phase.order`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from bat.phase.order import ASYNC_ORDER, BOOTSTRAP_ORDER, FINAL_ORDER, PHASE_NAMES, ROUND_ORDER
from bat.state.bank_layout import BankVersionLayout
from bat.state.layout import RunLayout

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


Files = Callable[[RunLayout, int], tuple["Path | str", ...]]
"""What a phase reads or writes in round r of a run: layout paths, or a short phrase for what is not a file."""


@dataclass(frozen=True)
class PhaseSpec:
    """One row of the table."""

    name: str
    target: str
    """`module:function` of the phase function `(ctx: PhaseContext) -> PhaseResult`."""
    reads: Files
    writes: Files
    resources: str
    """Key into `config.orchestrate.resources`."""
    writes_report: bool = False
    """The runner writes the round report (`round_NN/report.md`, report.json, plots) after this phase's function,
    as one of its outputs (route, final_test); not for a function that overrides the product's."""


def _bank(layout: RunLayout) -> BankVersionLayout:
    return layout.bank_version(1)


PHASES: dict[str, PhaseSpec] = {
    spec.name: spec
    for spec in (
        PhaseSpec(
            "synthesize",
            "bat.bank.phase:run_synthesize",
            lambda L, r: (
                "config (bank, benchmark)",
                "practice seed space",
                "base tokenizer",
                "refresh: newest controller aggregate before it (steering, LLM skill writer)",
            ),
            lambda L, r: (
                _bank(L).tasks,
                _bank(L).trajectories,
                _bank(L).sft_split("train"),
                _bank(L).sft_split("validation"),
                _bank(L).rl_rows,
                _bank(L).rl_index,
                _bank(L).states_dir,
                _bank(L).skills,
                _bank(L).manifest,
            ),
            "synthesize",
        ),
        PhaseSpec(
            "scan",
            "bat.leakage.phase:run_scan",
            lambda L, r: (_bank(L).path, L.fingerprint_meta, L.fingerprint_entries),
            lambda L, r: (_bank(L).leakage_report, _bank(L).admitted_marker, _bank(L).rejected_marker),
            "scan",
        ),
        PhaseSpec(
            "sft",
            "bat.train.phase:run_sft",
            lambda L, r: (_bank(L).sft_split("train"), _bank(L).sft_split("validation"), "base model"),
            lambda L, r: (L.sft_checkpoints, L.candidate_model(0), L.training_metrics(0, "sft")),
            "sft",
        ),
        PhaseSpec(
            "rollout",
            "bat.rollout.phase:run_rollout",
            lambda L, r: (L.plan(r), _bank(L).rl_rows, _bank(L).states_dir, "the plan's start checkpoint"),
            lambda L, r: (
                L.round(r).shard("rollout", 0).rollouts,
                L.round(r).shard("rollout", 0).timings,
                L.round(r).shard("rollout", 0).done,
            ),
            "rollout",
        ),
        PhaseSpec(
            "verify",
            "bat.verify.phase:run_verify",
            lambda L, r: (L.plan(r), L.round(r).shard("rollout", 0).rollouts, _bank(L).states_dir),
            lambda L, r: (L.round(r).shard("verify", 0).rewards, L.round(r).shard("verify", 0).done),
            "verify",
        ),
        PhaseSpec(
            "grpo",
            "bat.train.phase:run_grpo",
            lambda L, r: (
                L.plan(r),
                L.round(r).shard("rollout", 0).rollouts,
                L.round(r).shard("verify", 0).rewards,
                "the plan's start checkpoint",
            ),
            lambda L, r: (L.round_checkpoints(r), L.candidate_model(r), L.training_metrics(r, "grpo")),
            "grpo",
        ),
        PhaseSpec(
            "evaluate",
            "bat.evaluate.phase:run_evaluate",
            lambda L, r: (L.candidate_model(r), L.heldout_secret, "held-out suite"),
            lambda L, r: (
                L.round(r).aggregate("controller"),
                L.heldout_manifest(r, "controller"),
                L.heldout_run_records(r, "controller"),
                L.report_md(r),
                L.report_json(r),
            ),
            "evaluate",
        ),
        PhaseSpec(
            "route",
            "bat.curriculum.phase:run_route",
            lambda L, r: (
                L.round(r).aggregate("controller"),
                L.round(r - 1).decision,
                L.round(r - 1).best_after,
                _bank(L).rl_index,
            ),
            lambda L, r: (
                L.round(r).decision,
                L.round(r).best_after,
                L.best_json,
                L.plan(r + 1),
                L.report_md(r),
                L.report_json(r),
            ),
            "route",
            writes_report=True,
        ),
        PhaseSpec(
            "final_test",
            "bat.evaluate.phase:run_final_test",
            lambda L, r: (L.best_json, L.heldout_secret, "held-out final + test suites"),
            lambda L, r: (
                L.round(r).aggregate("final", "final_test"),
                L.round(r).aggregate("test", "final_test"),
                L.heldout_manifest(r, "final"),
                L.heldout_manifest(r, "test"),
                L.test_split_used,
                L.report_md(r),
                L.report_json(r),
            ),
            "final_test",
            writes_report=True,
        ),
    )
}

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
    """The product table with `config.orchestrate.phase_overrides` applied."""
    return {
        name: with_target(spec, config.orchestrate.phase_overrides.get(name, spec.target))
        for name, spec in PHASES.items()
    }


def with_target(spec: PhaseSpec, target: str) -> PhaseSpec:
    """`spec` running `target` instead; another function than the product's gets no round report from the runner."""
    return replace(spec, target=target, writes_report=spec.writes_report and target == spec.target)


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
    """Problems that would make a round fail to start (unimportable phase functions); [] when fine."""
    table = resolve_table(config)
    problems = []
    for name in phases or round_phases(round_index):
        try:
            load_phase_fn(table[name].target)
        except (ImportError, AttributeError, ValueError) as exc:
            problems.append(f"{name}: {exc}")
    return problems
