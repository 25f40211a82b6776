"""Experiment files: shipped ones load, arms resolve to matched budgets, bad input names field and valid choices."""

from pathlib import Path

import pytest

from bat.config.curriculum import GateConfig
from bat.experiment.run import select
from bat.experiment.spec import ExperimentError, arm_config, budget_signature, load_experiment, shared_config

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p for p in (REPO / "configs" / "experiments").glob("arms_*.yaml"))
"""The arms experiments (base, sft, grpo, bicurl and the drop-one-pool ablations under one budget)."""
SMOKE = REPO / "configs" / "smoke.yaml"


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(f"name: t\nbase_config: {SMOKE}\nseeds: [1]\n" + body)
    return path


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_experiments_load_with_matched_budgets(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    spec = load_experiment(path)
    trained = [a for a in spec.arms if a.kind == "trained"]
    sigs = [budget_signature(arm_config(spec, a, s)) for a in trained for s in spec.seeds[:1]]
    assert all(sig == sigs[0] for sig in sigs)
    arms = {a.name: arm_config(spec, a, spec.seeds[0]).curriculum for a in trained}
    assert (
        arms["grpo"].arm == "grpo" and arms["sft"].arm == "sft" and arms["bicurl"].pools == ("S-target", "S-mix", "E2E")
    )
    assert {tuple(c.pools) for n, c in arms.items() if n.startswith("no-")} == {
        ("S-mix", "E2E"),
        ("S-target", "E2E"),
        ("S-target", "S-mix"),
    }
    assert any(a.kind == "base" for a in spec.arms) and len(spec.seeds) >= 1
    shared = shared_config(spec, spec.seeds[0])
    assert shared.run.rounds == 0 and shared.evaluate.final_eval == "never"
    assert arm_config(spec, trained[0], spec.seeds[0]).run.seed == spec.seeds[0]


def test_the_rl_teaches_arms_differ_only_in_the_shuffled_reward(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    spec = load_experiment(REPO / "configs" / "experiments" / "rl_teaches.yaml")
    arm, twin = (arm_config(spec, name, 1) for name in ("stage-rl", "stage-rl-twin"))
    assert not arm.grpo.shuffle_rewards and twin.grpo.shuffle_rewards
    assert arm.model_dump(exclude={"grpo", "run"}) == twin.model_dump(exclude={"grpo", "run"})
    assert arm.run.seed == twin.run.seed
    assert arm.grpo.model_copy(update={"shuffle_rewards": True}) == twin.grpo
    assert arm.grpo.rollouts == "online" and arm.grpo.steps >= 40 and spec.secret_file is not None


def test_full_experiment_has_three_seeds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    spec = load_experiment(REPO / "configs" / "experiments" / "arms_local.yaml")
    assert len(spec.seeds) >= 3 and spec.report_split == "final"


def test_unknown_key_lists_valid_keys(tmp_path: Path) -> None:
    path = _write(tmp_path, "arms: [{name: a, overides: [curriculum.arm=sft]}]\n")
    with pytest.raises(ExperimentError) as info:
        load_experiment(path)
    assert "arms.0.overides: unknown key" in str(info.value) and "overrides" in str(info.value)


@pytest.mark.parametrize(
    ("arms", "match"),
    [
        (
            "[{name: a, overrides: [grpo.lr=1.0]}]",
            r"KEY under \['curriculum.', 'grpo.shuffle_rewards'\]",
        ),  # arm override outside curriculum
        ("[{name: a, overrides: [curriculum.batch_size=2]}]", "sets the training budget"),  # per-arm budget key
        ("[{name: a, overrides: [curriculum.arm=ppo]}]", r"(?s)arm .a. \(seed 1\).*curriculum.arm"),  # bad value
    ],
    ids=["outside-curriculum", "budget-key", "bad-value"],
)
def test_bad_arm_override_is_refused_with_its_reason(tmp_path: Path, arms: str, match: str) -> None:
    path = _write(tmp_path, f"arms: {arms}\n")
    with pytest.raises(ExperimentError, match=match):
        load_experiment(path)


def test_final_eval_must_stay_never_and_names_repeat(tmp_path: Path) -> None:
    path = _write(tmp_path, "overrides: [evaluate.final_eval=last_round]\narms: [{name: a}]\n")
    with pytest.raises(ExperimentError, match="final_eval must stay 'never'"):
        load_experiment(path)
    path = _write(tmp_path, "arms: [{name: a}, {name: a}]\n")
    with pytest.raises(ExperimentError, match=r"arm names repeat: \['a'\]"):
        load_experiment(path)


def test_select_rejects_unknown_arm_and_seed(tmp_path: Path) -> None:
    spec = load_experiment(_write(tmp_path, "arms: [{name: a}, {name: b, kind: base}]\n"))
    arms, seeds = select(spec, ["b"], None)
    assert [a.name for a in arms] == ["b"] and seeds == [1]
    with pytest.raises(ExperimentError, match=r"unknown arm 'c'; arms: \['a', 'b'\]"):
        select(spec, ["c"], None)
    with pytest.raises(ExperimentError, match=r"seeds \[9\] are not in the experiment; seeds: \[1\]"):
        select(spec, None, [9])


def test_missing_base_config_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text("name: t\nbase_config: nowhere.yaml\nseeds: [1]\narms: [{name: a}]\n")
    with pytest.raises(ExperimentError, match="base_config nowhere.yaml does not exist"):
        load_experiment(path)


def test_cli_bad_input_exits_2_with_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bat.cli.main import main

    assert main(["experiment", "--config", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml does not exist" in capsys.readouterr().err
    path = _write(tmp_path, "arms: [{name: a}]\n")
    assert main(["experiment", "--config", str(path), "--only", "zz"]) == 2
    assert "unknown arm 'zz'; arms: ['a']" in capsys.readouterr().err


def test_report_split_test_needs_the_test_split(tmp_path: Path) -> None:
    path = _write(tmp_path, "report_split: test\noverrides: [evaluate.test_split=false]\narms: [{name: a}]\n")
    with pytest.raises(ExperimentError, match="report_split 'test' needs evaluate.test_split=true"):
        load_experiment(path)
    path = _write(tmp_path, "report_split: test\noverrides: [evaluate.test_split=true]\narms: [{name: a}]\n")
    assert load_experiment(path).report_split == "test"


def test_bootstrap_seed_shares_one_bootstrap_across_seeds(tmp_path: Path) -> None:
    from bat.experiment.share import arm_dir, shared_dir

    path = tmp_path / "exp.yaml"
    path.write_text(
        f"name: t\nbase_config: {SMOKE}\nseeds: [1, 2]\nbootstrap_seed: 9\nstate_dir: {tmp_path}\n"
        "arms: [{name: a, overrides: [curriculum.arm=grpo]}]\n"
    )
    spec = load_experiment(path)
    assert shared_dir(spec, 1) == shared_dir(spec, 2) == tmp_path / "t" / "seed_9" / "_shared"
    assert shared_config(spec, 1).run.seed == shared_config(spec, 2).run.seed == 9
    assert [arm_config(spec, "a", s).run.seed for s in (1, 2)] == [1, 2]
    assert arm_dir(spec, 1, "a") != arm_dir(spec, 2, "a")
    per_seed = load_experiment(_write(tmp_path, "arms: [{name: a, overrides: [curriculum.arm=grpo]}]\n"))
    assert shared_config(per_seed, 1).run.seed == 1


def test_arm_state_is_seeded_under_a_relative_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bat.experiment.share import SharedInfo, seed_arm_state
    from bat.state.experiment_layout import SEED_MARKER_NAME as SEED_MARKER
    from bat.state.layout import RunLayout

    shared = RunLayout(tmp_path / "shared")
    (shared.models_dir / "tiny").mkdir(parents=True)
    (shared.models_dir / "tiny" / "config.json").write_text("{}")
    (shared.bank_root / "v0001").mkdir(parents=True)
    info = SharedInfo(seed=1, layout=shared, sft_checkpoint="", sft_digest="d", wall_s=0.0, compute_s=0.0)
    monkeypatch.chdir(tmp_path)
    layout = seed_arm_state(info, Path("state/seed_1/arm"))
    assert (tmp_path / "state/seed_1/arm" / SEED_MARKER).is_file()
    assert (layout.models_dir / "tiny" / "config.json").read_text() == "{}"
    assert (layout.bank_root / "v0001").is_dir()


def test_outer_loop_rule_is_part_of_the_matched_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """The promotion gate and fallback decide how much of each round's training is kept, so an arm x seed run under
    another gate rule is not budget-matched (the stale check compares these fields)."""
    monkeypatch.chdir(REPO)
    spec = load_experiment(REPO / "configs/experiments/arms_cpu.yaml")
    bicurl = next(a for a in spec.arms if a.name == "bicurl")
    cfg = arm_config(spec, bicurl, spec.seeds[0])
    sig = budget_signature(cfg)
    assert sig["curriculum.gate"]["enabled"] is False and sig["curriculum.fallback"]["kl_tau"] == 0.1
    gated = cfg.model_copy(update={"curriculum": cfg.curriculum.model_copy(update={"gate": GateConfig()})})
    assert budget_signature(gated)["curriculum.gate"] != sig["curriculum.gate"]


def test_gpu_variant_carries_the_cpu_experiments_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """arms_smollm_gpu.yaml is arms_cpu.yaml on CUDA, so the two results compare: every matched-budget field agrees
    but where the benchmark's tools run and how many evaluation runs go at once, and both widen the final split."""
    monkeypatch.chdir(REPO)
    cpu = load_experiment(REPO / "configs/experiments/arms_cpu.yaml")
    gpu = load_experiment(REPO / "configs/experiments/arms_smollm_gpu.yaml")
    assert [a.name for a in gpu.arms] == [a.name for a in cpu.arms] and gpu.seeds == cpu.seeds
    assert gpu.wide_final_repeats == cpu.wide_final_repeats and gpu.bootstrap_seed == cpu.bootstrap_seed
    placement = {("benchmark", "runtime"), ("evaluate", "parallel_runs")}
    for arm in cpu.arms:
        if arm.kind != "trained":
            continue
        sig = {
            side: budget_signature(arm_config(spec, arm.name, cpu.seeds[0]))
            for side, spec in (("cpu", cpu), ("gpu", gpu))
        }
        for section, part in placement:
            for side in sig:
                sig[side][section] = {k: v for k, v in sig[side][section].items() if k != part}
        assert sig["gpu"] == sig["cpu"], arm.name
