"""The pre-registered arm-versus-twin analysis on synthetic units: a learning arm passes every criterion, an arm
no better than its twin passes none, and a study with a unit missing decides nothing."""

from __future__ import annotations

import random

import pytest

from bat.experiment.twin_analysis import analyse, rise
from bat.schemas.twin_study import E2eRun, TwinUnit

SEEDS = (1, 2)
STATES = 20
RUNS = 200


def _unit(arm: str, seed: int, *, learns: bool) -> TwinUnit:
    rng = random.Random(f"{arm}-{seed}")
    rewards = [0.1 + (0.5 * step / 39 if learns else 0.0) + rng.uniform(-0.03, 0.03) for step in range(40)]
    base = [rng.uniform(0.1, 0.4) for _ in range(STATES)]
    probe = {0: base, 40: [min(1.0, b + (0.3 if learns else 0.0) + rng.uniform(-0.05, 0.05)) for b in base]}
    e2e = {f"run{i}": E2eRun(finished=rng.random() < (0.6 if learns else 0.2), overall=0.3) for i in range(RUNS)}
    return TwinUnit(arm=arm, seed=seed, rewards=rewards, probe=probe, e2e=e2e)


def _study(arm_learns: bool, drop: str | None = None):
    units = [_unit("stage-rl", s, learns=arm_learns) for s in SEEDS]
    units += [_unit("stage-rl-twin", s, learns=False) for s in SEEDS]
    units.append(TwinUnit(arm="sft", seed=1, e2e={f"run{i}": E2eRun(finished=False, overall=0.1) for i in range(RUNS)}))
    units = [u for u in units if f"{u.arm}-{u.seed}" != drop]
    return analyse(units, arm="stage-rl", twin="stage-rl-twin", reference="sft", seeds=SEEDS, steps=40, probe_step=40)


def test_rise_is_last_window_minus_first():
    assert rise([0.0] * 10 + [1.0] * 20 + [0.5] * 10) == pytest.approx(0.5)


def test_a_learning_arm_passes_every_criterion():
    result = _study(arm_learns=True)
    assert result.complete and not result.missing
    c1, c2, c3 = result.criteria
    assert c1.passed and c1.value == pytest.approx(0.5 * 30 / 39, abs=0.03) and c1.interval[0] > 0.15
    assert c2.passed and c2.value > 25 and c2.p < 0.01 and c2.detail["states"] == STATES
    assert c3.passed and c3.interval[0] > 0 and c3.detail["runs"] == RUNS
    assert result.overall["sft"] == pytest.approx(10.0)
    assert _study(arm_learns=True) == result  # the bootstrap is seeded


def test_an_arm_no_better_than_its_twin_passes_none():
    c1, c2, c3 = _study(arm_learns=False).criteria
    assert not c1.passed and not c2.passed and not c3.passed
    assert c1.interval[0] < 0 < c1.interval[1]


def test_a_missing_unit_leaves_every_criterion_undecided():
    result = _study(arm_learns=True, drop="stage-rl-twin-2")
    assert not result.complete and result.missing == ["stage-rl-twin seed 2"]
    assert all(c.passed is None for c in result.criteria)
    assert result.criteria[0].value is not None  # measured on the seeds present, but not decided
