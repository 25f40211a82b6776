"""Trajectory label checks and state starts on real RunScore records and hand-built turns."""

from bat.bank.checks import check_run, failed_pilot_turns, mistake_stage, state_starts
from bat.benchmark import RunScore
from bat.schemas.bank import TrajectoryTurn

STAGES = ["S1", "S2", "S3", "S4", "S5"]


def _score(stages, task=1.0, s3_fixed=None, pilot_failed=False, breach=False):
    items = {"S3": {"s3a_pilot_before_batch": True, "s3b_output_checked": True}}
    if s3_fixed is not None:
        items["S3"]["s3c_failure_fixed"] = s3_fixed
    agentic = sum(stages.values()) / len(stages)
    return RunScore(
        track="vqa",
        instance_id="px-vqa-1",
        stages=stages,
        items=items,
        task=task,
        agentic=agentic,
        overall=0.5 * task + 0.5 * agentic,
        breach=breach,
        breach_reasons=["read grader"] if breach else [],
        details={"pilot_failed": pilot_failed},
    )


def _turn(t, stage, name, clean=None):
    result = {"text": "x", "meta": {"clean": clean}} if clean is not None else {"text": "x"}
    return TrajectoryTurn(
        t=t,
        stage=stage,
        response=f"r{t}",
        call={"name": name, "arguments": {}},
        observation="o",
        record={"ok": True, "result": result},
    )


PERFECT = dict.fromkeys(STAGES, 1.0)
RECOVERY_TURNS = [
    _turn(0, "S1", "write_plan"),
    _turn(1, "S2", "load_model"),
    _turn(2, "S3", "run_model"),
    _turn(3, "S3", "check_outputs", clean=False),
    _turn(4, "S3", "run_model"),
    _turn(5, "S3", "check_outputs", clean=True),
    _turn(6, "S4", "run_model"),
    _turn(7, "S5", "submit"),
]


def test_success_needs_every_stage_and_the_task():
    assert check_run("success", _score(PERFECT), [], STAGES) == []
    problems = check_run("success", _score({**PERFECT, "S3": 0.5}, s3_fixed=False, pilot_failed=True), [], STAGES)
    assert any("weak stages ['S3']" in p for p in problems)
    assert any("low" in p or "task" in p for p in check_run("success", _score(PERFECT, task=0.2), [], STAGES))


def test_recovery_needs_a_failed_then_clean_pilot():
    score = _score(PERFECT, s3_fixed=True, pilot_failed=True)
    assert check_run("recovery", score, RECOVERY_TURNS, STAGES) == []
    assert failed_pilot_turns(RECOVERY_TURNS) == [3]
    assert state_starts("recovery", RECOVERY_TURNS, score, STAGES) == {"S3": 4}
    no_recheck = RECOVERY_TURNS[:4] + RECOVERY_TURNS[6:]
    assert any("never re-checked" in p for p in check_run("recovery", score, no_recheck, STAGES))


def test_failure_needs_an_uncorrected_mistake():
    score = _score({**PERFECT, "S3": 0.5}, task=0.3, s3_fixed=False, pilot_failed=True)
    assert check_run("failure", score, RECOVERY_TURNS, STAGES) == []
    assert mistake_stage(score, STAGES) == "S3"
    assert state_starts("failure", RECOVERY_TURNS, score, STAGES) == {"S4": 6, "S5": 7}
    assert any("no mistake" in p for p in check_run("failure", _score(PERFECT), [], STAGES))


def test_breach_and_label_mismatch_are_rejected():
    assert any("breach" in p for p in check_run("success", _score(PERFECT, breach=True), [], STAGES))
    mismatch = check_run("recovery", _score(PERFECT), RECOVERY_TURNS, STAGES)
    assert any("grades this run as 'success'" in p for p in mismatch)
    assert state_starts("success", RECOVERY_TURNS, _score(PERFECT), STAGES) == {
        "S1": 0,
        "S2": 1,
        "S3": 2,
        "S4": 6,
        "S5": 7,
    }


def test_validation_passes_count_pilot_runs():
    from bat.bank.e2e import validation_passes

    assert validation_passes(RECOVERY_TURNS) == 2


def test_rollout_limit_h_explicit_or_from_rollout_budgets():
    from bat.bank.e2e import rollout_limit
    from bat.config import load_config

    assert rollout_limit(load_config(None, [])) == 24
    derived = load_config(
        None,
        ["bank.rollout_limit_h=null", "rollout.budgets.max_assistant_turns=20", "rollout.budgets.max_tool_calls=17"],
    )
    assert rollout_limit(derived) == 17
