"""E2E surrogates with lambda_input < 1 (Eq. 12) from reduction grid v2, accepted by the unchanged Eq. 15."""

import json

import numpy as np

from bat.bank.synthesize import synthesize
from bat.benchmark.tracks import get_track
from bat.config import load_config
from bat.state.layout import RunLayout

V2 = ("bank.tracks=[classification,synthesis]", "bank.e2e_per_track=2", "bank.reduction_grid=v2")
"""Overrides on `one_task_bank`: two tracks, two E2E candidates each, reduction grid v2."""


def _e2e_rows(bank):
    return [r for r in bank.rows() if r.stage == "E2E"]


def test_v2_bank_accepts_e2e_rows_with_reduced_inputs(one_task_bank, tmp_path):
    """R_lambda (Eq. 12) with lambda_input < 1 is recorded in provenance, the state's inputs are the reduced ones,
    and the row passed every term of Eq. 15 (boot, T <= H, stage checks, validate passes)."""
    v2_bank, _ = synthesize(load_config(None, [*one_task_bank, *V2]), RunLayout(tmp_path / "run"))
    decisions = json.loads((v2_bank.path / "e2e_acceptance.json").read_text())
    reduced = [r for r in _e2e_rows(v2_bank) if r.provenance.reduction.input_fraction < 1.0]
    assert reduced, [r.provenance.reduction for r in _e2e_rows(v2_bank)]
    for row in reduced:
        lam = row.provenance.reduction
        assert lam.grid_version == "v2" and row.task.reduction == lam
        files = v2_bank.state_dir(row.state_id) / "files"
        spec = json.loads((files / "task" / "spec.json").read_text())
        assert len(spec["cases"]) == lam.cases
        full = get_track(row.track).case_shape(1.0)
        full_input = [n // 2 for n in full] if row.track == "synthesis" else list(full)
        for path in spec["inputs"].values():
            array = np.load(files / path, allow_pickle=False)
            assert array.size <= lam.input_fraction * np.prod(full_input), (row.track, array.shape)
        decision = decisions[row.state_id]
        assert decision["boot"] and decision["fits_h"] and decision["validate_ok"] and not decision["reasons"]
        assert all(decision["stage_checks"].values())
    assert v2_bank.manifest().counts["e2e"]["rejected_by_reason"] == {}


def test_reduced_candidates_still_obey_the_rollout_limit(one_task_bank, tmp_path):
    """Eq. 15's T <= H applies unchanged to reduced surrogates: a limit below the teacher's turns rejects them all."""
    config = load_config(None, [*one_task_bank, *V2, "bank.rollout_limit_h=5"])
    bank, _ = synthesize(config, RunLayout(tmp_path / "run"))
    counts = bank.manifest().counts["e2e"]
    assert counts == {"accepted": 0, "candidates": 4, "rejected_by_reason": {"limit_h": 4}}
    assert any(t.task.reduction.input_fraction < 1.0 for t in bank.trajectories() if t.task.reduction)
