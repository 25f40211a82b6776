"""`bat model diff`: how far one checkpoint's weights, and with --kl-state its policy, moved from another's."""

import json

import pytest
from curriculum_helpers import make_bank, perturbed_copy

from bat.cli.main import main
from bat.config.load import resolved_dict
from bat.config.root import BatConfig
from bat.state.layout import RunLayout


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """The tiny model, a copy with slightly and one with strongly perturbed weights (same tokenizer)."""
    from bat.policy.tiny import build_tiny_model

    root = tmp_path_factory.mktemp("models")
    base = build_tiny_model(root / "base", BatConfig().model.tiny, 3)
    return base, perturbed_copy(base, root / "near", 1e-4), perturbed_copy(base, root / "far", 0.5)


def test_the_weight_distance_grows_with_the_change_and_is_0_for_the_same_weights(checkpoints):
    from bat.policy.weight_diff import weight_diff

    base, near, far = checkpoints
    same, small, large = weight_diff(base, base), weight_diff(base, near), weight_diff(base, far)
    assert same.relative_norm == 0 and same.elements_changed == 0 and same.tensors_changed == 0
    assert 0 < small.relative_norm < 0.01 < large.relative_norm and small.tensors == large.tensors == same.tensors
    assert large.elements_changed / large.elements > 0.99 and large.max_relative_norm >= large.relative_norm


def test_model_diff_prints_the_weight_distance_and_the_kl_on_the_runs_probe_rows(tmp_path, checkpoints, capsys):
    base, near, far = checkpoints
    layout = make_bank(RunLayout(tmp_path / "run").ensure(), per_stage=4)
    cfg = BatConfig.model_validate({"curriculum": {"fallback": {"kl_prompts": 4, "kl_new_tokens": 8}}})
    layout.run_json.write_text(json.dumps({"config": resolved_dict(cfg)}))
    kl = {}
    for name, folder in (("near", near), ("far", far)):
        assert main(["model", "diff", str(base), str(folder), "--kl-state", str(layout.root)]) == 0
        out = capsys.readouterr().out
        assert "||B - A|| / ||A||" in out and "elements changed" in out
        kl[name] = float(out.split("KL(B || A) ")[1].split()[0])
    assert 0 <= kl["near"] < 0.01 < kl["far"], kl
    assert not list(layout.root.rglob("chunk_*.json"))  # nothing is written under the run


def test_model_diff_of_a_folder_without_weights_names_it_and_exits_2(tmp_path, checkpoints, capsys):
    base, _, _ = checkpoints
    assert main(["model", "diff", str(base), str(tmp_path)]) == 2
    assert str(tmp_path) in capsys.readouterr().err
