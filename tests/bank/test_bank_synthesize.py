"""End-to-end synthesis of a tiny bank over the real benchmark (in-process tool runner for speed)."""

import json

import pytest

from bat.bank import store
from bat.bank.practice import instance_for
from bat.bank.replay import PRIOR_RECORDS, replay_prefix
from bat.bank.rows import open_row_env
from bat.bank.states import prefixed, tree_digest
from bat.bank.synthesize import synthesize
from bat.config import load_config
from bat.state.jsonl import read_jsonl
from bat.state.layout import RunLayout

OVERRIDES = [
    "bank.tracks=[classification]",
    "bank.tasks_per_track=1",
    "bank.e2e_per_track=1",
    "benchmark.runtime=inprocess",
]


@pytest.fixture(scope="module")
def config():
    return load_config(None, OVERRIDES)


@pytest.fixture(scope="module")
def bank(config, tmp_path_factory):
    layout = RunLayout(tmp_path_factory.mktemp("bank") / "run")
    version, reused = synthesize(config, layout)
    assert not reused
    return version


def _rows(bank):
    return {(r.stage, r.outcome): r for r in bank.rows()}


def _prior(bank, row):
    return read_jsonl(bank.path / row.state.path / PRIOR_RECORDS)


def _names(records):
    return [r["tool"].split(":")[-1] for r in records]


def test_counts_per_stage_track_outcome(bank):
    counts = bank.manifest().counts
    assert counts["rl"] == {
        "E2E": {"classification": {"success": 1}},
        "S1": {"classification": {"success": 1}},
        "S2": {"classification": {"success": 1}},
        "S3": {"classification": {"recovery": 1, "success": 1}},
        "S4": {"classification": {"failure": 1, "success": 1}},
        "S5": {"classification": {"failure": 1, "success": 1}},
    }
    assert counts["rl_total"] == len(bank.rows()) == 9
    assert counts["e2e"] == {"accepted": 1, "candidates": 1, "rejected_by_reason": {}}
    assert counts["trajectories_unchecked"] == {}
    bank.verify()
    index = bank.index()
    assert sorted(index.by_stage) == ["E2E", "S1", "S2", "S3", "S4", "S5"]
    assert len({r.state_id for r in bank.rows()}) == 9


def test_synthesis_is_deterministic(bank, config, tmp_path):
    parallel = config.model_copy(update={"bank": config.bank.model_copy(update={"workers": 2})})
    other, reused = synthesize(parallel, RunLayout(tmp_path / "other"))
    assert not reused
    assert other.manifest().digests == bank.manifest().digests
    assert other.manifest().fingerprint == bank.manifest().fingerprint
    layout = RunLayout(bank.path.parents[1])
    again, reused = synthesize(config, layout)
    assert reused and again.version == bank.version and layout.bank_versions() == [bank.version]


def test_replaying_a_prefix_reproduces_the_stored_digest(bank, config, tmp_path):
    trajectories = {t.trajectory_id: t for t in bank.trajectories()}
    for row in bank.rows():
        traj = trajectories[row.provenance.trajectory_id]
        workspace, records = replay_prefix(
            instance_for(row.task, config), traj.turns, row.provenance.prefix_turns, tmp_path / row.state_id, config
        )
        assert prefixed(tree_digest(workspace)) == row.state.digest, row.state_id
        assert records == _prior(bank, row)


def test_success_state_starts_clean_at_the_boundary(bank):
    row = _rows(bank)[("S3", "success")]
    files = bank.state_dir(row.state_id) / "files"
    assert (files / "plan.md").is_file()
    instance_state = json.loads((files / ".tool_state" / "state.json").read_text())
    assert instance_state["loaded"]
    assert not (files / "outputs").exists() or not any((files / "outputs").iterdir())
    assert "run_model" not in _names(_prior(bank, row))
    assert _names(_prior(bank, row))[-1] == "load_model"


def test_recovery_state_starts_after_a_failed_pilot(bank):
    row = _rows(bank)[("S3", "recovery")]
    prior = _prior(bank, row)
    assert _names(prior)[-2:] == ["run_model", "check_outputs"]
    last = prior[-1]
    assert last["stage"] == "S3" and last["result"]["meta"]["clean"] is False
    assert prior[-2]["args"]["normalize"] == "none"
    assert last["result"]["text"].strip() in row.prompt[1].content
    assert any((bank.state_dir(row.state_id) / "files" / "outputs").iterdir())


def test_failure_states_inherit_the_uncorrected_mistake(bank):
    for stage in ("S4", "S5"):
        row = _rows(bank)[(stage, "failure")]
        prior = _prior(bank, row)
        checks = [r for r in prior if r["tool"].endswith("check_outputs")]
        assert checks and all(r["result"]["meta"]["clean"] is False for r in checks)
        assert all(r["args"].get("normalize") == "none" for r in prior if r["tool"].endswith("run_model"))
        assert f"You start at stage {stage}" in row.prompt[1].content


def test_e2e_state_is_the_fresh_reduced_task(bank, config):
    row = _rows(bank)[("E2E", "success")]
    assert row.provenance.prefix_turns == 0 and row.reward_source == "e2e_rubric_task"
    assert row.task.reduction is not None and row.provenance.reduction == row.task.reduction
    spec = json.loads((bank.state_dir(row.state_id) / "files" / "task" / "spec.json").read_text())
    assert len(spec["cases"]) == row.task.reduction.cases
    assert not (bank.state_dir(row.state_id) / "files" / "plan.md").exists()
    assert {i.stage for i in row.rubric} == {"S1", "S2", "S3", "S4", "S5"}
    assert all(f"Stage S{i}" in row.skill for i in range(1, 6))
    decision = json.loads((bank.path / "e2e_acceptance.json").read_text())[row.state_id]
    assert decision["boot"] and decision["fits_h"] and decision["leak_clean"] is True
    assert all(decision["stage_checks"].values())


def test_env_opened_on_a_recovery_row_grades_the_fix(bank, config, tmp_path):
    from bat.benchmark.agents import _good_settings, _pilot_cases

    row = _rows(bank)[("S3", "recovery")]
    env = open_row_env(bank.path, row, tmp_path, config)
    assert env.reset().startswith("# Task")
    instance = instance_for(row.task, config)
    cases = _pilot_cases(instance)
    env.step({"name": "run_model", "arguments": {"cases": cases, **_good_settings(instance)}})
    obs = env.step({"name": "check_outputs", "arguments": {"cases": cases}})
    assert "all checked outputs match the contract" in obs.text
    assert env.score().items["S3"]["s3c_failure_fixed"] is True


def test_rl_rows_carry_no_teacher_text(bank):
    text = (bank.files.rl_rows).read_text()
    assert "<tool_call>" not in text
    for traj in bank.trajectories():
        for turn in traj.turns:
            assert turn.response not in text


def test_sft_rows_split_by_trajectory_and_exclude_failures(bank):
    train, val = bank.sft_rows("train"), bank.sft_rows("validation")
    assert train and val
    assert not {r.trajectory_id for r in train} & {r.trajectory_id for r in val}
    assert {r.outcome for r in train + val} <= {"success", "recovery"}
    assert "E2E" in {r.stage for r in train + val}
    counts = bank.manifest().counts["sft"]
    assert counts["train"] == len(train) and counts["validation"] == len(val)
    trajectories = {t.trajectory_id: t for t in bank.trajectories()}
    for row in train + val:
        assert row.target == trajectories[row.trajectory_id].turns[row.turn].response


def test_leakage_preflight_admits_the_bank(bank, config):
    from bat.leakage.preflight import scan_and_admit

    layout = RunLayout(bank.path.parents[1])
    report = scan_and_admit(layout, bank.version, config)
    assert report.verdict == "admitted", report.hits_by_kind
    assert store.open_bank(layout).version == bank.version


def test_bad_track_lists_valid_ones(tmp_path):
    cfg = load_config(None, ["bank.tracks=[radiology]"])
    with pytest.raises(ValueError, match="valid \\(benchmark.tracks\\)"):
        synthesize(cfg, RunLayout(tmp_path / "run"))


def test_phase_function_reuses_the_version(bank, config):
    from bat.bank.phase import run_synthesize
    from bat.phase.context import PhaseContext

    ctx = PhaseContext(config=config, layout=RunLayout(bank.path.parents[1]), round=0, phase="synthesize")
    result = run_synthesize(ctx)
    assert result.outputs == [bank.path]
    assert result.counts["bank_version"] == bank.version and result.counts["rl_rows"] == 9
    assert result.extra["reused"] is True


def test_cli_show_prints_counts(bank, capsys):
    from bat.cli.main import main

    assert main(["bank", "show", "--state", str(bank.path.parents[1]), "--version", str(bank.version)]) == 0
    out = capsys.readouterr().out
    assert f"bank v{bank.version:04d}" in out and "recovery" in out and "E2E" in out
    assert main(["bank", "show", "--state", str(bank.path.parents[1]), "--version", "99"]) == 2


def test_e2e_candidate_over_the_rollout_limit_is_rejected(tmp_path):
    cfg = load_config(None, OVERRIDES + ["bank.outcomes=[success]", "bank.rollout_limit_h=5", "leakage.enabled=false"])
    bank, _ = synthesize(cfg, RunLayout(tmp_path / "run"))
    counts = bank.manifest().counts
    assert counts["e2e"] == {"accepted": 0, "candidates": 1, "rejected_by_reason": {"limit_h": 1}}
    assert "E2E" not in counts["rl"] and "E2E" not in counts["sft"]["by_stage"]
    assert not [p for p in (bank.path / "states").iterdir() if p.name.endswith(".E2E")]
    rejected = [t for t in bank.trajectories() if t.task.reduction is not None]
    assert len(rejected) == 1 and not rejected[0].checked and "H=5" in rejected[0].check_failures[0]


def test_prefix_replays_to_the_same_state_inside_bubblewrap(bank, config, tmp_path):
    from bat.sandbox import bwrap_available

    assert bwrap_available(), "bubblewrap is required (scripts/bootstrap.sh installs it)"
    sandboxed = config.model_copy(
        update={
            "benchmark": config.benchmark.model_copy(update={"runtime": "sandbox"}),
            "sandbox": config.sandbox.model_copy(update={"runtime": "bwrap"}),
        }
    )
    row = _rows(bank)[("S3", "recovery")]
    traj = {t.trajectory_id: t for t in bank.trajectories()}[row.provenance.trajectory_id]
    workspace, records = replay_prefix(
        instance_for(row.task, sandboxed), traj.turns, row.provenance.prefix_turns, tmp_path / "bw", sandboxed
    )
    assert prefixed(tree_digest(workspace)) == row.state.digest
    assert {r["runtime"] for r in records} == {"bwrap"}
    assert [r["result"] for r in records] == [r["result"] for r in _prior(bank, row)]


def test_leak_term_rejects_an_e2e_row_matching_the_heldout_index(bank, config):
    from bat.bank.e2e import Acceptance, check_leak
    from bat.leakage.index import build_index
    from bat.leakage.scanner import Scanner

    row = _rows(bank)[("E2E", "success")]
    planted = row.task.task_id.split(".")[0]  # pretend the held-out side published this identifier
    scanner = Scanner(build_index([{"kind": "identifier", "value": planted}], config.leakage))
    verdict = check_leak(Acceptance(), row, scanner)
    assert verdict.leak_clean is False and not verdict.accepted
    assert verdict.reasons[0].startswith("leak: ") and "identifier" in verdict.reasons[0]
    clean = check_leak(
        Acceptance(), row, Scanner(build_index([{"kind": "identifier", "value": "zz-none-42"}], config.leakage))
    )
    assert clean.leak_clean is True and clean.accepted


def test_killed_synthesis_resumes_from_finished_tasks(bank, config, tmp_path, monkeypatch):
    from bat.bank import tasks as tasks_mod

    real, calls = tasks_mod.run_task, []

    def dies_on_third(task, *args):
        calls.append(task.task_id)
        if len(calls) == 3:
            raise KeyboardInterrupt("preempted")
        return real(task, *args)

    layout = RunLayout(tmp_path / "run")
    monkeypatch.setattr(tasks_mod, "run_task", dies_on_third)
    with pytest.raises(KeyboardInterrupt):
        synthesize(config, layout)
    builds = list(layout.bank_root.glob(".build-*"))
    assert len(builds) == 1 and len(list((builds[0] / tasks_mod.MARKERS).iterdir())) == 2
    assert layout.bank_versions() == []
    calls.clear()
    resumed, reused = synthesize(config, layout)
    assert not reused and len(calls) == len(resumed.tasks()) - 2
    assert resumed.manifest().digests == bank.manifest().digests
    assert not list(layout.bank_root.glob(".build-*")) and not (resumed.path / tasks_mod.MARKERS).exists()
    assert not list(layout.scratch_dir.glob("bank-*"))


def test_slot_whose_trajectory_fails_its_check_gets_a_replacement(tmp_path, monkeypatch):
    from bat.bank import checks

    real, seen = checks.check_run, []

    def reject_first_recovery(outcome, score, turns, stages):
        """Fault injection: the first recovery trajectory fails its check; everything else is checked for real."""
        problems = real(outcome, score, turns, stages)
        if outcome == "recovery" and "recovery" not in seen:
            problems = [*problems, "forced: the first recovery run is rejected"]
        seen.append(outcome)
        return problems

    monkeypatch.setattr(checks, "check_run", reject_first_recovery)
    cfg = load_config(None, OVERRIDES + ["bank.e2e_per_track=0", "leakage.enabled=false"])
    bank, _ = synthesize(cfg, RunLayout(tmp_path / "run"))
    counts = bank.manifest().counts
    recovery = [t for t in bank.trajectories() if t.task.variant == "recovery"]
    assert [(t.task.slot, t.task.attempt) for t in recovery] == [(0, k) for k in range(len(recovery))]
    assert len(recovery) >= 2 and recovery[0].check_failures == ["forced: the first recovery run is rejected"]
    assert [t.checked for t in recovery] == [False] * (len(recovery) - 1) + [True]
    assert counts["trajectories_unchecked"] == {"recovery": len(recovery) - 1}
    assert counts["rl"]["S3"]["classification"] == {"recovery": 1, "success": 1}
    assert len({t.task.seed for t in recovery}) == len(recovery)
    recovery_rows = [r for r in bank.rows() if r.outcome == "recovery"]
    assert [r.task.task_id for r in recovery_rows] == [recovery[-1].task.task_id]


def test_recovery_sft_rows_never_train_the_mistaken_pilot(bank):
    from bat.bank.checks import flawed_pilot_turns

    sft = bank.sft_rows("train") + bank.sft_rows("validation")
    recovery = [t for t in bank.trajectories() if t.outcome == "recovery" and t.checked]
    assert recovery
    for traj in recovery:
        flawed = flawed_pilot_turns(traj.turns)
        assert flawed and all(traj.turns[t].call["arguments"]["normalize"] == "none" for t in flawed)
        targets = {r.turn for r in sft if r.trajectory_id == traj.trajectory_id}
        assert targets and not targets & set(flawed)
        assert {t + 1 for t in flawed} <= targets  # the check that reveals the problem is still taught
    assert bank.sft_rejected()["skipped_flawed"] == sum(len(flawed_pilot_turns(t.turns)) for t in recovery)


def test_cli_show_refuses_a_damaged_version(bank, tmp_path, capsys):
    import shutil

    from bat.cli.main import main

    state = tmp_path / "run"
    shutil.copytree(bank.path.parents[1], state)
    rows = state / bank.path.relative_to(bank.path.parents[1]) / "trajectories.jsonl"
    rows.chmod(0o644)
    rows.write_bytes(rows.read_bytes()[:-30])  # a torn copy
    assert main(["bank", "show", "--state", str(state), "--version", str(bank.version)]) == 2
    out = capsys.readouterr().out
    assert "differs from its manifest in: ['trajectories.jsonl']" in out and "the version is damaged" in out


def test_a_refresh_draws_new_practice_tasks_as_a_new_version(tmp_path):
    from bat.bank.phase import run_synthesize
    from bat.phase.context import PhaseContext

    cfg = load_config(None, [*OVERRIDES, "bank.outcomes=[success]", "bank.e2e_per_track=0", "leakage.enabled=false"])
    layout = RunLayout(tmp_path / "run")
    first, _ = synthesize(cfg, layout)
    refreshed, reused = synthesize(cfg, layout, refresh=1)
    assert not reused and refreshed.version == first.version + 1
    assert (first.manifest().seeds["refresh"], refreshed.manifest().seeds["refresh"]) == (0, 1)
    assert refreshed.manifest().fingerprint != first.manifest().fingerprint
    assert {t.seed for t in first.tasks()}.isdisjoint({t.seed for t in refreshed.tasks()})  # new practice tasks
    assert synthesize(cfg, layout)[0].version == first.version  # refresh 0 stays the bootstrap bank
    ctx = PhaseContext(config=cfg, layout=layout, round=1, phase="synthesize")  # the async refresh beside round 1
    result = run_synthesize(ctx)
    assert result.extra["reused"] is True and result.counts["bank_version"] == refreshed.version
    assert result.counts["refresh"] == 1


def test_cli_refuses_a_negative_refresh_index(tmp_path, capsys):
    from bat.cli.main import main

    assert main(["bank", "synthesize", "--state", str(tmp_path / "run"), "--refresh", "-1"]) == 2
    assert "--refresh must be 0" in capsys.readouterr().err and not (tmp_path / "run").exists()


def test_steered_refresh_gives_weaker_tracks_more_tasks_from_aggregates_only(tmp_path):
    from bat.bank.synthesize import steered_track_tasks
    from bat.evaluate.store import write_aggregate
    from bat.schemas.evaluation import EvalAggregate, TrackAggregate

    cfg = load_config(None, ["bank.tasks_per_track=4", "benchmark.tracks=[classification, detection, vqa]"])
    assert steered_track_tasks(cfg, {"classification": 0.9, "detection": 0.1, "vqa": None}) == {
        "classification": 1,
        "detection": 5,
        "vqa": 6,
    }
    assert sum(steered_track_tasks(cfg, {"classification": 0.0, "detection": 0.0, "vqa": 0.0}).values()) == 12
    small = load_config(None, [*OVERRIDES, "bank.outcomes=[success]", "bank.e2e_per_track=0", "leakage.enabled=false"])
    layout = RunLayout(tmp_path / "run").ensure()
    track = TrackAggregate(track="classification", n_runs=1, overall=0.3)
    agg = EvalAggregate(
        round=0, split="controller", checkpoint="c", checkpoint_digest="d", suite_version="s", harness_version="h",
        manifest_digest="m", stage_keys=["S1"], stages={"S1": 0.3}, task=0.3, agentic=0.3, overall=0.3,
        half_widths={}, tracks={"classification": track}, n_runs=1, routable=True,
    )  # fmt: skip
    write_aggregate(layout, agg)  # round 0's controller aggregate: the only thing steering reads
    bank, _ = synthesize(small, layout, refresh=1)
    steering = bank.manifest().config["steering"]
    assert steering["source_round"] == 0 and steering["track_overall"] == {"classification": 0.3}
    assert steering["track_tasks"] == {"classification": 1}
    off = small.model_copy(update={"bank": small.bank.model_copy(update={"refresh_steering": "off"})})
    unsteered, _ = synthesize(off, layout, refresh=1)
    assert unsteered.manifest().config["steering"] is None
    assert {t.seed for t in unsteered.tasks()} == {t.seed for t in bank.tasks()}


def test_a_steered_refresh_plans_the_steered_task_counts(tmp_path):
    """The steering is applied, not only recorded: the refresh's task plan holds `track_tasks` tasks per track."""
    from collections import Counter

    from bat.bank.practice import plan_tasks
    from bat.bank.synthesize import bank_seed, refreshed_config, steering
    from bat.evaluate.store import write_aggregate
    from bat.schemas.evaluation import EvalAggregate, TrackAggregate

    tracks = ["classification", "detection"]
    cfg = load_config(None, [f"bank.tracks=[{','.join(tracks)}]", "bank.tasks_per_track=2", "bank.outcomes=[success]"])
    layout = RunLayout(tmp_path / "run").ensure()
    scores = {"classification": 0.9, "detection": 0.1}
    agg = EvalAggregate(
        round=0, split="controller", checkpoint="c", checkpoint_digest="d", suite_version="s", harness_version="h",
        manifest_digest="m", stage_keys=["S1"], stages={"S1": 0.5}, task=0.5, agentic=0.5, overall=0.5,
        half_widths={}, tracks={t: TrackAggregate(track=t, n_runs=1, overall=v) for t, v in scores.items()},
        n_runs=2, routable=True,
    )  # fmt: skip
    write_aggregate(layout, agg)
    steered, record = steering(refreshed_config(cfg, 1), layout, 1)
    assert record["track_tasks"] == {"classification": 1, "detection": 3}  # 4 tasks split by 1 - Overall
    planned = Counter(t.track for t in plan_tasks(steered, bank_seed(steered), tracks))
    assert planned == {"classification": 1, "detection": 3}
    assert Counter(t.track for t in plan_tasks(cfg, bank_seed(cfg), tracks)) == {"classification": 2, "detection": 2}


def test_history_opening_shows_a_stage_row_as_its_sft_slice(bank, config):
    """Under `rollout.state_context: history` a stage row opens exactly as the SFT slice of the first turn after
    its prefix (same system turn, brief and teacher turns); E2E rows and `handoff` keep the stored prompt."""
    from bat.bank.rows import history_opening
    from bat.benchmark.prompts import to_dicts
    from bat.rollout.envs import opening_messages

    history = config.model_copy(update={"rollout": config.rollout.model_copy(update={"state_context": "history"})})
    slices = {r.row_id: r for split in ("train", "validation") for r in bank.sft_rows(split)}
    matched = 0
    for row in bank.rows():
        trajectory = bank.trajectory(row.provenance.trajectory_id)
        opening = history_opening(row, trajectory, config)
        assert opening_messages(bank, row, config) == to_dicts(row.prompt)
        assert opening_messages(bank, row, history) == to_dicts(opening)
        n = row.provenance.prefix_turns
        if row.stage == "E2E" or n == 0:
            assert opening == row.prompt
            continue
        assert [m.role for m in opening] == ["system", "user"] + ["assistant", "tool"] * n
        assert [m.content for m in opening[2::2]] == [t.response for t in trajectory.turns[:n]]
        sft_row = slices.get(f"{trajectory.trajectory_id}.t{trajectory.turns[n].t:03d}")
        if sft_row is not None:
            assert sft_row.messages == opening
            matched += 1
    assert matched >= 3  # S2..S5 of the success trajectory at least
    stage_row = next(r for r in bank.rows() if r.provenance.prefix_turns)
    other = next(t for t in bank.trajectories() if t.trajectory_id != stage_row.provenance.trajectory_id)
    with pytest.raises(ValueError, match="was built from trajectory"):
        history_opening(stage_row, other, config)
    with pytest.raises(KeyError, match="not in bank"):
        bank.trajectory("no-such-trajectory")
