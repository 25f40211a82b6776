"""The phase table, overrides and config validation of the orchestrate section."""

import pytest

from bat.config import ConfigError, load_config
from bat.orchestrate.graph import (
    ASYNC_ORDER,
    BOOTSTRAP_ORDER,
    PHASES,
    ROUND_ORDER,
    check_round,
    load_phase_fn,
    resolve_table,
    round_phases,
)


def test_table_points_at_real_phase_modules_in_data_flow_order():
    assert list(PHASES) == ["synthesize", "scan", "sft", "rollout", "verify", "grpo", "evaluate", "route", "final_test"]
    owners = {p: spec.target.split(":")[0] for p, spec in PHASES.items()}
    assert owners == {
        "synthesize": "bat.bank.phase",
        "scan": "bat.leakage.phase",
        "sft": "bat.train.phase",
        "rollout": "bat.rollout.phase",
        "verify": "bat.verify.phase",
        "grpo": "bat.online.phase",
        "evaluate": "bat.evaluate.phase",
        "route": "bat.curriculum.phase",
        "final_test": "bat.evaluate.phase",
    }
    assert round_phases(0) == BOOTSTRAP_ORDER == ("synthesize", "scan", "sft", "evaluate", "route")
    assert round_phases(3) == ROUND_ORDER == ("rollout", "verify", "grpo", "evaluate", "route")
    assert ASYNC_ORDER == ("synthesize", "scan")
    with pytest.raises(ValueError, match="round index"):
        round_phases(-1)


def test_final_test_runs_once_after_the_last_rounds_route():
    from bat.config import load_config

    cfg = load_config(None, ["run.rounds=2"])
    assert round_phases(1, cfg) == ROUND_ORDER
    assert round_phases(2, cfg) == (*ROUND_ORDER, "final_test")
    no_test = load_config(None, ["run.rounds=2", "evaluate.test_split=false"])
    assert round_phases(2, no_test) == ROUND_ORDER


def test_each_phase_is_declared_by_its_own_package():
    from bat.bank.phase import SYNTHESIZE, run_synthesize
    from bat.curriculum.phase import ROUTE
    from bat.evaluate.phase import EVALUATE, FINAL_TEST
    from bat.leakage.phase import SCAN
    from bat.online.phase import GRPO
    from bat.rollout.phase import ROLLOUT
    from bat.train.phase import SFT, run_sft
    from bat.verify.phase import VERIFY

    declared = [SYNTHESIZE, SCAN, SFT, ROLLOUT, VERIFY, GRPO, EVALUATE, ROUTE, FINAL_TEST]
    assert [PHASES[spec.name] for spec in declared] == declared and list(PHASES.values()) == declared
    assert SYNTHESIZE.run is run_synthesize and SFT.run is run_sft and SFT.target == "bat.train.phase:run_sft"
    assert all(spec.product for spec in declared)


def test_overrides_replace_only_named_phases():
    import toy_phases

    cfg = load_config(None, ["orchestrate.phase_overrides.verify=toy_phases:verify"])
    table = resolve_table(cfg)
    assert table["verify"].target == "toy_phases:_run" and table["verify"].run is toy_phases.verify
    assert not table["verify"].product and not table["verify"].writes_report
    assert table["rollout"] is PHASES["rollout"]


def test_load_phase_fn_errors_name_target_and_choices():
    fn = load_phase_fn("toy_phases:scan")
    assert callable(fn)
    with pytest.raises(AttributeError, match=r"no function 'nope'.*'evaluate'"):
        load_phase_fn("toy_phases:nope")
    with pytest.raises(ImportError, match="cannot import 'no_such_module_xyz'"):
        load_phase_fn("no_such_module_xyz:run")
    with pytest.raises(ValueError, match="not 'module:function'"):
        load_phase_fn("toy_phases")


def test_check_round_reports_unimportable_phases():
    cfg = load_config(None, ["orchestrate.phase_overrides.sft=no_such_module_xyz:sft"])
    problems = check_round(cfg, 0, ("sft",))
    assert len(problems) == 1 and problems[0].startswith("sft: ") and "no_such_module_xyz" in problems[0]


@pytest.mark.parametrize(
    "override, needle",
    [
        ("orchestrate.executor=kubernetes", "orchestrate.executor"),
        ("orchestrate.resources.trainer.gpus=1", "unknown resources key(s) ['trainer']"),
        ("orchestrate.resources.sft.gpus=-1", "orchestrate.resources.sft.gpus"),
        ("orchestrate.resources.sft.nodes=2", "needs launcher='tasks'"),
        ("orchestrate.phase_overrides.train=x:y", "unknown phase 'train'"),
        ("orchestrate.phase_overrides.sft=justamodule", "is not 'module:function'"),
        ("orchestrate.colour=blue", "unknown key"),
    ],
)
def test_bad_orchestrate_config_is_rejected_with_a_clear_message(override, needle):
    with pytest.raises(ConfigError) as info:
        load_config(None, [override])
    assert needle in str(info.value)


def test_partial_resources_keep_defaults_for_other_phases():
    cfg = load_config(None, ["orchestrate.resources.grpo.gpus=8", "orchestrate.resources.grpo.launcher=tasks"])
    res = cfg.orchestrate.resources
    assert res["grpo"].gpus == 8 and res["grpo"].launcher == "tasks"
    assert set(res) == set(PHASES) | {"driver"}
