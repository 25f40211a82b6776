"""Routing examples of CONTRACTS.md: lowest stage; after a held gate the largest positive regression; ties earliest."""

import pytest

from bat.curriculum.router import route_target

KEYS = ("S1", "S2", "S3", "S4", "S5")


def test_target_is_lowest_stage():
    scores = {"S1": 0.8, "S2": 0.6, "S3": 0.2, "S4": 0.5, "S5": 0.9}
    assert route_target(scores, KEYS) == ("S3", "lowest")


def test_ties_go_to_earliest_stage():
    scores = {"S1": 0.8, "S2": 0.3, "S3": 0.7, "S4": 0.3, "S5": 0.3}
    assert route_target(scores, KEYS) == ("S2", "lowest")


def test_held_gate_targets_largest_positive_regression():
    best = {"S1": 0.8, "S2": 0.6, "S3": 0.5, "S4": 0.5, "S5": 0.9}
    cand = {"S1": 0.7, "S2": 0.6, "S3": 0.55, "S4": 0.3, "S5": 0.88}  # S4 fell 0.2 (largest); S3 is not lowest
    assert route_target(cand, KEYS, gate_held=True, reference=best) == ("S4", "largest_regression")
    # without the held gate the lowest stage wins
    assert route_target(cand, KEYS) == ("S4", "lowest")
    cand2 = {"S1": 0.5, "S2": 0.6, "S3": 0.55, "S4": 0.45, "S5": 0.9}  # S1 fell 0.3 though S4 is lowest
    assert route_target(cand2, KEYS, gate_held=True, reference=best) == ("S1", "largest_regression")
    assert route_target(cand2, KEYS) == ("S4", "lowest")


def test_held_gate_without_positive_regression_falls_back_to_lowest():
    best = {"S1": 0.5, "S2": 0.5, "S3": 0.5, "S4": 0.5, "S5": 0.5}
    cand = {"S1": 0.6, "S2": 0.5, "S3": 0.7, "S4": 0.55, "S5": 0.9}
    assert route_target(cand, KEYS, gate_held=True, reference=best) == ("S2", "lowest")


def test_regression_ties_go_to_earliest_stage():
    best = {"S1": 0.5, "S2": 0.6, "S3": 0.7, "S4": 0.5, "S5": 0.5}
    cand = {"S1": 0.5, "S2": 0.5, "S3": 0.6, "S4": 0.5, "S5": 0.5}  # S2 and S3 both fell 0.1
    assert route_target(cand, KEYS, gate_held=True, reference=best) == ("S2", "largest_regression")


def test_null_and_unknown_stages_are_rejected():
    with pytest.raises(ValueError, match="null"):
        route_target({"S1": None, "S2": 0.1}, KEYS)
    with pytest.raises(ValueError, match="valid"):
        route_target({"S9": 0.1}, KEYS)
    with pytest.raises(ValueError, match="reference"):
        route_target({"S1": 0.1}, KEYS, gate_held=True)
