"""Fallback by KL on real checkpoints: route measures KL(candidate || best) on held-back bank probe prompts."""

import pytest
from curriculum_helpers import build_agg, make_bank, perturbed_copy

from bat.config.root import BatConfig
from bat.curriculum.phase import run_route
from bat.evaluate.store import write_aggregate
from bat.phase.context import PhaseContext
from bat.schemas.routing import RoundPlan
from bat.state.atomic import read_json
from bat.state.layout import RunLayout


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """The tiny model and a copy with perturbed weights (same tokenizer)."""
    from bat.policy.tiny import build_tiny_model

    root = tmp_path_factory.mktemp("models")
    base = build_tiny_model(root / "base", BatConfig().model.tiny, 3)
    moved = perturbed_copy(base, root / "moved", 0.5)
    return base, moved


@pytest.mark.slow
def test_kl_above_tau_falls_back_to_the_best(tmp_path, checkpoints):
    base, moved = checkpoints
    layout = make_bank(RunLayout(tmp_path / "run").ensure(), per_stage=4)
    cfg = BatConfig.model_validate(
        {
            "run": {"rounds": 3},
            "curriculum": {"batches_per_round": 1, "fallback": {"kl_prompts": 4, "kl_new_tokens": 8, "kl_tau": 0.1}},
        }
    )
    write_aggregate(layout, build_agg(0, 0.40, checkpoint=str(base)))
    run_route(PhaseContext(config=cfg, layout=layout, round=0, phase="route"))
    write_aggregate(layout, build_agg(1, 0.45, checkpoint=str(moved)))  # better scores, but a large policy shift
    result = run_route(PhaseContext(config=cfg, layout=layout, round=1, phase="route"))
    decision = read_json(layout.phase_dir(1, "route") / "decision.json")
    assert decision["kl"] > 0.1 and result.counts["kl"] == decision["kl"]
    assert decision["action"] == "fallback" and "KL(candidate || best)" in decision["reason"]
    assert RoundPlan.model_validate(read_json(layout.plan(2))).start_checkpoint == str(base)
    assert read_json(layout.best_json)["checkpoint"] == str(base)
    # the same checkpoint twice has KL 0 and is promoted normally
    write_aggregate(layout, build_agg(2, 0.46, checkpoint=str(base)))
    assert run_route(PhaseContext(config=cfg, layout=layout, round=2, phase="route")).extra["action"] == "promote"


def test_the_kl_check_loads_both_copies_in_model_dtype(tmp_path, checkpoints, monkeypatch):
    import torch

    import bat.policy.loader as loader
    from bat.curriculum.kl import measure_kl
    from bat.schemas.routing import BestCheckpoint

    base, moved = checkpoints
    layout = make_bank(RunLayout(tmp_path / "run").ensure(), per_stage=4)
    loaded = []
    real = loader.load_model

    def spy(*args, **kwargs):
        model = real(*args, **kwargs)
        loaded.append((kwargs.get("dtype"), next(model.parameters()).dtype))
        return model

    monkeypatch.setattr(loader, "load_model", spy)
    best = BestCheckpoint.model_construct(checkpoint=str(base))  # measure_kl reads only the checkpoint folder
    kls = {}
    for dtype in ("float32", "bfloat16"):
        cfg = BatConfig.model_validate(
            {"model": {"dtype": dtype}, "curriculum": {"fallback": {"kl_prompts": 4, "kl_new_tokens": 8}}}
        )
        kls[dtype] = measure_kl(PhaseContext(config=cfg, layout=layout, round=1, phase="route"), str(moved), best)
    assert loaded == [("float32", torch.float32)] * 2 + [("bfloat16", torch.bfloat16)] * 2
    assert kls["float32"] > 0.1 and kls["bfloat16"] > 0.1, kls  # the same large shift seen in either precision


def test_a_candidate_with_the_bests_weights_has_kl_0_without_loading_a_model(tmp_path, checkpoints, monkeypatch):
    import shutil

    import bat.policy.loader as loader
    from bat.curriculum.kl import measure_kl
    from bat.schemas.routing import BestCheckpoint

    base, moved = checkpoints
    layout = make_bank(RunLayout(tmp_path / "run").ensure(), per_stage=4)
    copy = shutil.copytree(base, tmp_path / "unchanged")  # a round whose steps all had equal rewards exports this
    loaded = []
    real = loader.load_model
    monkeypatch.setattr(loader, "load_model", lambda *a, **k: loaded.append(a) or real(*a, **k))
    cfg = BatConfig.model_validate({"curriculum": {"fallback": {"kl_prompts": 4, "kl_new_tokens": 8}}})
    ctx = PhaseContext(config=cfg, layout=layout, round=1, phase="route")
    best = BestCheckpoint.model_construct(checkpoint=str(base))
    assert measure_kl(ctx, str(copy), best) == 0.0 and loaded == []
    assert "the candidate's weights are the best's" in layout.round(1).events.read_text()
    assert measure_kl(ctx, str(moved), best) > 0.1 and len(loaded) == 2  # other weights are measured
