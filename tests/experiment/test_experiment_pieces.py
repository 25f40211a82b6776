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
from bat.schemas.evaluation import EvalAggregate
from bat.schemas.experiment import SeedRun
from bat.schemas.experiment_results import ArmResult, BudgetAudit, ExperimentResults


def _agg(overall: float) -> EvalAggregate:
    """A final-split aggregate over two tracks, each scoring `overall`."""
    tracks = {t: {"track": t, "n_runs": 1, "overall": overall} for t in ("a", "b")}
    return EvalAggregate.model_validate(
        {"round": 2, "split": "final", "checkpoint": "c", "checkpoint_digest": "d", "suite_version": "s"}
        | {"harness_version": "h", "manifest_digest": "m", "stage_keys": [], "stages": {}, "task": overall}
        | {"agentic": overall, "overall": overall, "tracks": tracks, "n_runs": 2, "routable": True}
    )


def test_a_finished_piece_is_written_once_and_read_back_as_committed(tmp_path: Path) -> None:
    assert write_arm_piece(tmp_path, "bicurl", 1, SeedRun(seed=1, status="failed")) is None  # unfinished: not recorded
    path = write_arm_piece(tmp_path, "bicurl", 1, SeedRun(seed=1, status="done", wall_s=10.0))
    assert path == tmp_path / "runs" / "bicurl" / "seed_1.json"
    # a finished record is never overwritten
    assert write_arm_piece(tmp_path, "bicurl", 1, SeedRun(seed=1, status="done", wall_s=99.0)) is None
    piece = read_arm_piece(tmp_path, "bicurl", 1)
    assert piece is not None
    assert piece.wall_s == 10.0 and piece.source == "committed" and piece.arm == "bicurl"
    assert piece.cpu is not None and piece.cpu.model and piece.commit and piece.recorded_at
    assert read_arm_piece(tmp_path, "bicurl", 2) is None
    write_shared_piece(tmp_path, 1, "a" * 64, 5.0)
    assert committed_arms(tmp_path) == {"bicurl": [1]}  # the shared bootstrap is not an arm


def test_a_rebuilt_bootstrap_with_another_digest_is_named(tmp_path: Path) -> None:
    assert digest_check(tmp_path, 1, "b" * 64) is None  # nothing committed yet
    write_shared_piece(tmp_path, 1, "a" * 64, 5.0)
    assert digest_check(tmp_path, 1, "a" * 64) is None
    message = digest_check(tmp_path, 1, "b" * 64)
    assert message is not None and "b" * 16 in message and "a" * 16 in message
    assert isa_kind(cpu_facts()) in message


def test_isa_kind_orders_amx_over_avx512_over_avx2() -> None:
    assert isa_kind({"flags": ["avx2", "avx512f", "amx_tile"]}) == "amx"
    assert isa_kind({"flags": ["avx2", "avx512f"]}) == "avx512"
    assert isa_kind({"flags": ["avx2"]}) == "avx2" and isa_kind({"flags": []}) == "other"


def test_budget_audit_names_arms_trained_from_another_bootstrap(tmp_path: Path) -> None:
    from bat.experiment.budget_audit import budget_audit as _budget

    spec = _two_arm_spec(tmp_path)

    def run(seed: int, digest: str) -> SeedRun:
        return SeedRun(
            seed=seed,
            status="done",
            shared_sft_digest=digest,
            rollouts=8,
            grpo_steps=1,
            plan_rows=2,
            plan_unique_rows=2,
        )

    def arm(*seeds: SeedRun) -> ArmResult:
        return ArmResult(kind="trained", rl=True, seeds=list(seeds))

    same = {"grpo": arm(run(1, "a" * 64), run(2, "a" * 64)), "bicurl": arm(run(1, "a" * 64))}
    assert _budget(spec, same).one_bootstrap and _budget(spec, same).matched
    mixed = {"grpo": arm(run(1, "a" * 64), run(2, "b" * 64)), "bicurl": arm(run(1, "a" * 64))}
    audit = _budget(spec, mixed)
    assert not audit.one_bootstrap and not audit.matched
    assert audit.sft_digests == {"1": {"a" * 16: ["grpo/s1", "bicurl/s1"], "b" * 16: ["grpo/s2"]}}


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


TWO_ARMS = (
    "  - {name: grpo, overrides: [curriculum.arm=grpo]}\n  - {name: bicurl, overrides: [curriculum.arm=bicurl]}\n"
)


def _two_arm_spec(tmp_path: Path, arms: str = TWO_ARMS, extra: str = ""):
    """An experiment on the smoke config with seeds 1-2 under `tmp_path`; `arms` the YAML list, `extra` more keys."""
    from bat.experiment.spec import load_experiment

    repo = Path(__file__).resolve().parents[2]
    exp = tmp_path / "exp.yaml"
    exp.write_text(
        f"name: t\nbase_config: {repo / 'configs' / 'smoke.yaml'}\nseeds: [1, 2]\nbootstrap_seed: 1\n"
        f"state_dir: {tmp_path / 'state'}\nout_dir: {tmp_path / 'out'}\n{extra}arms:\n{arms}"
    )
    return load_experiment(exp)


def test_a_superseded_arm_seed_is_set_aside_listed_and_run_again(tmp_path: Path) -> None:
    import pytest

    from bat.experiment.pieces import SupersedeError, superseded_records
    from bat.experiment.run import select, supersede
    from bat.experiment.runs_report import superseded_table
    from bat.experiment.share import arm_dir

    spec = _two_arm_spec(tmp_path)
    out = spec.out_dir
    write_arm_piece(out, "bicurl", 1, SeedRun(seed=1, status="done", aggregate=_agg(0.197)))
    write_arm_piece(out, "grpo", 1, SeedRun(seed=1, status="done"))
    state = arm_dir(spec, 1, "bicurl")
    (state / "round_01").mkdir(parents=True)
    arms, seeds = select(spec, ["bicurl"], [1])
    with pytest.raises(SupersedeError, match="lower-case"):
        supersede(spec, arms, seeds, "Reward V2!", "x", out)
    with pytest.raises(SupersedeError, match="reason"):
        supersede(spec, arms, seeds, "rubric-v2", " ", out)
    lines = supersede(spec, arms, seeds, "rubric-v2", "reward v3 credits only the rollout's own evidence", out)
    assert len(lines) == 2 and not state.exists()
    assert (spec.state_dir / "t" / "seed_1" / "_superseded" / "rubric-v2" / "bicurl" / "round_01").is_dir()
    assert committed_arms(out) == {"grpo": [1]}  # bicurl seed 1 runs again; grpo is untouched
    (record,) = superseded_records(out)
    assert record.arm == "bicurl" and record.superseded is not None and record.superseded.tag == "rubric-v2"
    assert "own evidence" in record.superseded.reason and record.superseded.by_commit
    # nothing is left to supersede under the same selection, and a tag is used once per arm x seed
    with pytest.raises(SupersedeError, match="nothing to supersede"):
        supersede(spec, arms, seeds, "rubric-v2b", "again", out)
    write_arm_piece(out, "bicurl", 1, SeedRun(seed=1, status="done"))
    with pytest.raises(SupersedeError, match="superseded under tag"):
        supersede(spec, arms, seeds, "rubric-v2", "again", out)
    assert committed_arms(out) == {"bicurl": [1], "grpo": [1]}  # a refused supersede moves nothing
    # the README lists the superseded run with its numbers and reason, apart from the arms' tables
    table = "\n".join(superseded_table(ExperimentResults(superseded=superseded_records(out))))
    assert "## Superseded runs" in table and "| rubric-v2 | bicurl | 1 | 19.7 |" in table and "own evidence" in table
    assert superseded_table(ExperimentResults(superseded=[])) == []


def test_supersede_flags_are_checked_before_anything_moves(tmp_path: Path, capsys) -> None:
    from bat.cli.main import main

    spec = _two_arm_spec(tmp_path)
    write_arm_piece(spec.out_dir, "bicurl", 1, SeedRun(seed=1, status="done"))
    config = str(tmp_path / "exp.yaml")
    for argv, message in (
        (["--supersede", "v2"], "go together"),
        (["--supersede", "v2", "--reason", "r"], "needs --only ARM and --seeds N"),
        (["--supersede", "v2", "--reason", "r", "--only", "grpo", "--seeds", "1"], "nothing to supersede"),
    ):
        assert main(["experiment", "--config", config, *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err
    assert committed_arms(spec.out_dir) == {"bicurl": [1]}


def test_one_shared_bootstrap_is_listed_once_not_once_per_seed() -> None:
    from bat.experiment.write import _budget_section

    budget = BudgetAudit(matched=True, signature={}, differing_fields=[], rl_arms=[], per_seed={}, note="")
    shared = {str(s): {"seed": 1, "sft_digest": "a" * 64, "wall_s": 1457.0} for s in (1, 2, 3)}
    lines = _budget_section(ExperimentResults.model_validate({"budget": budget, "shared": shared, "bootstrap_seed": 1}))
    assert [x for x in lines if "bootstrap wall" in x] == [
        f"* run seed 1: SFT digest `{'a' * 16}`, bootstrap wall 1457 s"
    ]
    per_seed = _budget_section(ExperimentResults.model_validate({"budget": budget, "shared": shared}))
    assert sum("bootstrap wall" in x for x in per_seed) == 3


def test_a_piece_run_under_another_budget_is_stale_listed_and_never_averaged(tmp_path: Path, capsys) -> None:
    from bat.cli.main import main
    from bat.experiment.budget_audit import expected_budget
    from bat.experiment.collect import collect
    from bat.experiment.spec import BUDGET_FIELD_DEFAULTS, arm_config
    from bat.experiment.write import _budget_section

    arms = "  - {name: grpo, overrides: [curriculum.arm=grpo]}\n  - {name: sft, overrides: [curriculum.arm=sft]}\n"
    spec = _two_arm_spec(tmp_path, arms, "overrides: [grpo.lr=5.0e-5]\nreference_arm: grpo\n")
    exp = tmp_path / "exp.yaml"
    now = expected_budget(arm_config(spec, "grpo", 1))
    assert now["grpo.lr"] == 5e-5 and "grpo.lr" not in expected_budget(arm_config(spec, "sft", 1))
    # how stage rows open shapes no E2E-only arm: grpo is not held to it, an arm with stage pools is
    assert "rollout.state_context" not in now
    grpo = arm_config(spec, "grpo", 1)
    bicurl = grpo.model_copy(update={"curriculum": grpo.curriculum.model_copy(update={"arm": "bicurl"})})
    assert expected_budget(bicurl)["rollout.state_context"] == "handoff"
    assert "grpo.stage_row_credit" not in now and expected_budget(bicurl)["grpo.stage_row_credit"] == "own-stage"
    # what the single final reward pays holds the grpo arm only; a record that predates the field paid Overall
    assert now["verify.final_reward"] == "task" and "verify.final_reward" not in expected_budget(bicurl)
    assert BUDGET_FIELD_DEFAULTS["verify.final_reward"] == "overall"
    tracks = {t: {"track": t, "n_runs": 1, "overall": 0.2} for t in ("a", "b")}
    agg = {"final": {"round": 2, "split": "final", "checkpoint": "c", "checkpoint_digest": "d", "suite_version": "s"}}
    agg["final"] |= {"harness_version": "h", "manifest_digest": "m", "stage_keys": [], "stages": {}, "task": 0.2}
    agg["final"] |= {"agentic": 0.2, "overall": 0.2, "tracks": tracks, "n_runs": 2, "routable": True}
    counts = {"rollouts": 8, "grpo_steps": 1, "plan_rows": 2, "plan_unique_rows": 2}
    stale = {"seed": 1, "status": "done", "budget": {**now, "grpo.lr": 1e-5}, "aggregates": agg, **counts}
    write_arm_piece(spec.out_dir, "grpo", 1, SeedRun(**{**stale, "wall_s": 999.0}))
    ok = {"seed": 2, "status": "done", "budget": now, "aggregates": {}, "wall_s": 10.0, **counts}
    write_arm_piece(spec.out_dir, "grpo", 2, SeedRun(**ok))
    # the sft arm never runs GRPO: its lr is not part of what it must match
    write_arm_piece(spec.out_dir, "sft", 1, SeedRun(seed=1, status="done", budget={**now, "grpo.lr": 1e-5}))
    write_arm_piece(spec.out_dir, "sft", 2, SeedRun(seed=2, status="done", aggregates=agg))
    results = collect(spec)
    grpo = {s.seed: s for s in results.arms["grpo"].seeds}
    assert grpo[1].status == "stale" and grpo[1].stale_fields == {"grpo.lr": [1e-5, 5e-5]}
    assert grpo[2].status == "done" and [s.status for s in results.arms["sft"].seeds] == ["done"] * 2
    assert "final" not in results.arms["grpo"].summaries and "final" in results.arms["sft"].summaries
    assert results.arms["grpo"].wall_s_mean == 10.0  # a stale run's wall is not averaged either
    budget = results.budget
    assert budget is not None
    assert not budget.matched and budget.stale == {"grpo/s1": {"grpo.lr": [1e-5, 5e-5]}}
    assert budget.unverified == ["sft/s2"]  # recorded before pieces carried their budget
    text = "\n".join(_budget_section(results))
    assert "Stale runs, left out of every mean" in text and "grpo/s1 {'grpo.lr': [1e-05, 5e-05]}" in text
    assert "(not checked): sft/s2" in text
    assert main(["experiment", "--config", str(exp), "--collect-only"]) == 1
    printed = capsys.readouterr().out
    assert "arm grpo seed 1: stale (ran under other budget fields" in printed and "--supersede TAG" in printed


def test_the_bootstrap_record_retires_with_the_last_trained_arm_that_used_it(tmp_path: Path) -> None:
    from bat.experiment.pieces import read_shared_piece, superseded_records
    from bat.experiment.run import select, supersede

    spec = _two_arm_spec(tmp_path)
    out = spec.out_dir
    write_shared_piece(out, 1, "a" * 64, 5.0)
    for arm in ("grpo", "bicurl"):
        write_arm_piece(out, arm, 1, SeedRun(seed=1, status="done", shared_sft_digest="a" * 64))
    arms, seeds = select(spec, ["bicurl"], [1])
    lines = supersede(spec, arms, seeds, "pin", "a pinned bootstrap", out)
    assert len(lines) == 1 and read_shared_piece(out, 1) is not None  # grpo still trained from it: kept
    arms, seeds = select(spec, ["grpo"], [1])
    lines = supersede(spec, arms, seeds, "pin", "a pinned bootstrap", out)
    assert lines[-1].startswith("bootstrap record (no committed trained arm left on it) -> ")
    assert read_shared_piece(out, 1) is None and digest_check(out, 1, "b" * 64) is None  # the rebuild is recorded anew
    assert (out / "superseded" / "pin" / "_shared" / "seed_1.json").exists()
    assert sorted(str(r.arm) for r in superseded_records(out)) == ["bicurl", "grpo"]  # not listed as an arm run
