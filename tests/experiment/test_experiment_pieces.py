"""Committed pieces: written once, read back as `committed`, the bootstrap digest checked, the budget audit naming
arms trained from different SFT checkpoints."""

from pathlib import Path

from bat.experiment.pieces import (
    committed_arms,
    digest_check,
    read_arm_piece,
    write_arm_piece,
    write_shared_piece,
)
from bat.perf.machine import cpu_facts, isa_kind


def test_a_finished_piece_is_written_once_and_read_back_as_committed(tmp_path: Path) -> None:
    assert write_arm_piece(tmp_path, "bicurl", 1, {"seed": 1, "status": "failed"}) is None  # unfinished: not recorded
    path = write_arm_piece(tmp_path, "bicurl", 1, {"seed": 1, "status": "done", "wall_s": 10.0})
    assert path == tmp_path / "runs" / "bicurl" / "seed_1.json"
    # a finished record is never overwritten
    assert write_arm_piece(tmp_path, "bicurl", 1, {"seed": 1, "status": "done", "wall_s": 99.0}) is None
    piece = read_arm_piece(tmp_path, "bicurl", 1)
    assert piece["wall_s"] == 10.0 and piece["source"] == "committed" and piece["arm"] == "bicurl"
    assert piece["cpu"]["model"] and "commit" in piece and "recorded_at" in piece
    assert read_arm_piece(tmp_path, "bicurl", 2) is None
    write_shared_piece(tmp_path, 1, {"sft_digest": "a" * 64, "wall_s": 5.0})
    assert committed_arms(tmp_path) == {"bicurl": [1]}  # the shared bootstrap is not an arm


def test_a_rebuilt_bootstrap_with_another_digest_is_named(tmp_path: Path) -> None:
    assert digest_check(tmp_path, 1, "b" * 64) is None  # nothing committed yet
    write_shared_piece(tmp_path, 1, {"sft_digest": "a" * 64, "wall_s": 5.0})
    assert digest_check(tmp_path, 1, "a" * 64) is None
    message = digest_check(tmp_path, 1, "b" * 64)
    assert message is not None and "b" * 16 in message and "a" * 16 in message
    assert isa_kind(cpu_facts()) in message


def test_isa_kind_orders_amx_over_avx512_over_avx2() -> None:
    assert isa_kind({"flags": ["avx2", "avx512f", "amx_tile"]}) == "amx"
    assert isa_kind({"flags": ["avx2", "avx512f"]}) == "avx512"
    assert isa_kind({"flags": ["avx2"]}) == "avx2" and isa_kind({"flags": []}) == "other"


def test_budget_audit_names_arms_trained_from_another_bootstrap(tmp_path: Path) -> None:
    from bat.experiment.collect import _budget
    from bat.experiment.spec import load_experiment

    repo = Path(__file__).resolve().parents[2]
    exp = tmp_path / "exp.yaml"
    exp.write_text(
        f"name: t\nbase_config: {repo / 'configs' / 'smoke.yaml'}\nseeds: [1, 2]\nbootstrap_seed: 1\n"
        f"state_dir: {tmp_path / 'state'}\nout_dir: {tmp_path / 'out'}\n"
        "arms:\n  - {name: grpo, overrides: [curriculum.arm=grpo]}\n  - {name: bicurl, overrides: [curriculum.arm=bicurl]}\n"
    )
    spec = load_experiment(exp)

    def run(seed: int, digest: str) -> dict:
        return {
            "seed": seed,
            "status": "done",
            "shared_sft_digest": digest,
            "rollouts": 8,
            "grpo_steps": 1,
            "plan_rows": 2,
            "plan_unique_rows": 2,
        }

    same = {"grpo": {"seeds": [run(1, "a" * 64), run(2, "a" * 64)]}, "bicurl": {"seeds": [run(1, "a" * 64)]}}
    assert _budget(spec, same)["one_bootstrap"] and _budget(spec, same)["matched"]
    mixed = {"grpo": {"seeds": [run(1, "a" * 64), run(2, "b" * 64)]}, "bicurl": {"seeds": [run(1, "a" * 64)]}}
    audit = _budget(spec, mixed)
    assert not audit["one_bootstrap"] and not audit["matched"]
    assert audit["sft_digests"] == {"1": {"a" * 16: ["grpo/s1", "bicurl/s1"], "b" * 16: ["grpo/s2"]}}


def test_the_base_arm_is_seeded_from_a_bootstrap_without_a_locally_built_model(tmp_path: Path) -> None:
    """A pretrained policy is read from the model cache, so the shared bootstrap has no `models/` to link."""
    from bat.experiment.share import SharedInfo, seed_arm_state
    from bat.state.atomic import read_json
    from bat.state.layout import RunLayout

    shared = RunLayout(tmp_path / "_shared")
    shared.root.mkdir()
    info = SharedInfo(seed=1, layout=shared, sft_checkpoint="", sft_digest="d" * 64, wall_s=0.0, compute_s=0.0)
    arm = seed_arm_state(info, tmp_path / "base", models_only=True)
    assert not arm.models_dir.exists()
    assert arm.heldout_secret.read_bytes() == shared.heldout_secret.read_bytes()  # the same held-out suite
    marker = next(p for p in (tmp_path / "base").iterdir() if p.suffix == ".json")
    assert read_json(marker)["copied"] == [] and read_json(marker)["models_only"] is True
