"""Across-seed aggregation (track = statistical unit), paired comparison and the closing note, on built aggregates."""

import statistics

import pytest
from scipy import stats

from bat.experiment.summary import arm_summary, compare
from bat.experiment.write import _ordering
from bat.schemas.evaluation import EvalAggregate, TrackAggregate
from bat.schemas.experiment import SeedRun
from bat.schemas.experiment_results import ExperimentResults

STAGES = ["S1", "S2"]


def _results(data: dict) -> ExperimentResults:
    """Collected results from a partial dict (arms default to trained, seeds to seed 1): what the report reads."""
    arms = {
        name: {"kind": "trained", **arm, "seeds": [{"seed": 1, **x} for x in arm.get("seeds", [])]}
        for name, arm in data.get("arms", {}).items()
    }
    return ExperimentResults.model_validate({**data, "arms": arms})


def _agg(track_overall: dict[str, float]) -> EvalAggregate:
    tracks = {
        t: TrackAggregate(track=t, n_runs=1, stages={"S1": v, "S2": v / 2}, task=v, agentic=v, overall=v)
        for t, v in track_overall.items()
    }
    mean = sum(track_overall.values()) / len(track_overall)
    return EvalAggregate(
        round=1,
        split="final",
        checkpoint="c",
        checkpoint_digest="d",
        suite_version="s",
        harness_version="h",
        manifest_digest="m",
        stage_keys=STAGES,
        stages={"S1": mean, "S2": mean / 2},
        task=mean,
        agentic=mean,
        overall=mean,
        tracks=tracks,
        n_runs=len(tracks),
        routable=True,
    )


def test_arm_summary_averages_seeds_per_track_then_tracks() -> None:
    seeds = [_agg({"a": 0.2, "b": 0.4, "c": 0.9}), _agg({"a": 0.4, "b": 0.2, "c": 0.5})]
    s = arm_summary(seeds, STAGES, 0.95)
    track_means = [0.3, 0.3, 0.7]
    assert s.n_seeds == 2 and s.track_means["overall"] == pytest.approx(dict(zip("abc", track_means)))
    assert s.mean["overall"] == pytest.approx(sum(track_means) / 3)
    expected_hw = stats.t.ppf(0.975, 2) * statistics.stdev(track_means) / 3**0.5
    assert s.half_width["overall"] == pytest.approx(expected_hw)
    assert s.seed_sd["overall"] == pytest.approx(statistics.stdev([0.5, 1.1 / 3]))
    assert s.seed_min["overall"] == pytest.approx(1.1 / 3) and s.seed_max["overall"] == pytest.approx(0.5)
    assert s.mean["S2"] == pytest.approx(s.mean["S1"] / 2)


def test_null_track_makes_metric_null_and_empty_arm_is_empty() -> None:
    agg = _agg({"a": 0.2, "b": 0.4})
    broken = agg.model_copy(
        update={"tracks": {**agg.tracks, "b": agg.tracks["b"].model_copy(update={"overall": None})}, "overall": None}
    )
    s = arm_summary([agg, broken], STAGES, 0.95)
    assert s.mean["overall"] is None and s.mean["task"] is not None
    assert arm_summary([], STAGES, 0.95).mean == {}


def test_compare_paired_deltas_and_closing_note() -> None:
    ref = arm_summary([_agg({"a": 0.6, "b": 0.7, "c": 0.9})], STAGES, 0.95)
    other = arm_summary([_agg({"a": 0.2, "b": 0.4, "c": 0.4})], STAGES, 0.95)
    cmp = compare(ref, other, 0.95)
    assert cmp is not None
    assert cmp.deltas == pytest.approx({"a": 0.4, "b": 0.3, "c": 0.5}) and cmp.n_tracks == 3
    assert cmp.mean_delta == pytest.approx(0.4)
    assert cmp.p_value == pytest.approx(stats.ttest_1samp([0.4, 0.3, 0.5], 0.0).pvalue)
    data = {
        "report_split": "final",
        "reference_arm": "bicurl",
        "comparisons": {"grpo": cmp, "no-e2e": None},
        "arms": {
            "bicurl": {"summary": ref},
            "grpo": {"summary": other},
            "no-e2e": {"summary": arm_summary([], STAGES, 0.95)},
        },
    }
    note = _ordering(_results(data))
    assert "bicurl (73.3) > grpo (33.3)" in note and "bicurl − grpo: +40.0 points ±" in note
    assert "bicurl is ahead" in note and "bicurl vs no-e2e: not comparable" in note
    assert "other held-out suites" not in note  # no suite recorded anywhere: one suite
    # grpo's seed evaluated on another held-out suite (another disk's secret): its row says so
    data["arms"]["grpo"]["seeds"] = [{"seed": 1, "status": "done", "heldout_suite": "ec6d4bf3cc05f0dc"}]
    assert "bicurl is ahead. Evaluated on other held-out suites than the reference's" in _ordering(_results(data))
    assert "Anchored on the SFT" not in _ordering(_results(data))  # no wide evaluation anchored it
    # the wide final evaluation anchored the pair on the SFT: the row quotes it (final split only)
    anchored = {"design": "anchored", "mean_delta": -0.027, "half_width": 0.095, "p_value": 0.576, "n_runs": [40, 80]}
    data["wide"] = [{"repeats": 10, "vs_reference": {"grpo": anchored}}]
    line = next(x for x in _ordering(_results(data)).splitlines() if x.startswith("* bicurl − grpo"))
    assert line.endswith("Anchored on the SFT over the wide final runs (40 vs 80): -2.7 points ± 9.5, p = 0.576.")
    data["wide"][0]["vs_reference"]["grpo"] = {**anchored, "design": "unpaired"}
    assert "Anchored on the SFT" not in _ordering(_results(data))


def test_stage_staircase_table_profile_and_figure(tmp_path) -> None:
    from bat.experiment.plots import plot_stage_staircase
    from bat.experiment.stage_report import stage_tables

    def seed(stages_by_round, status="done"):
        return {"status": status, "curve": {"rounds": list(range(len(stages_by_round))), "stages": stages_by_round}}

    results = _results(
        {
            "experiment": "t",
            "seeds": [1, 2],
            "stage_keys": STAGES,
            "arms": {
                "bicurl": {
                    "seeds": [
                        seed([{"S1": 0.2, "S2": 0.0}, {"S1": 0.6, "S2": 0.1}]),
                        seed([{"S1": 0.4, "S2": None}, {"S1": 0.8, "S2": 0.3}]),
                        seed(
                            [{"S1": 1.0, "S2": 1.0}, {"S1": 1.0, "S2": 1.0}], status="stale"
                        ),  # listed, never averaged
                    ]
                },
                "base": {"seeds": [{"status": "done"}]},
            },
        }
    )
    lines = "\n".join(stage_tables(results))
    assert "| bicurl | 0 | 30.0 | 0.0 |" in lines and "| bicurl | 1 | 70.0 | 20.0 |" in lines
    assert "| bicurl | 0 -> 1 | 30.0 -> 70.0 (+40.0) | 0.0 -> 20.0 (+20.0) |" in lines
    assert "| base |" not in lines  # an arm without rounds has no staircase
    path = plot_stage_staircase(results, tmp_path / "stages.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_held_out_profile_other_split_table_route_cells_and_note_per_split() -> None:
    from bat.experiment.runs_report import route_cells
    from bat.experiment.stage_report import held_out_profile_table, other_split_tables
    from bat.experiment.summary import held_out_profile
    from bat.experiment.write import _closing_note
    from bat.schemas.experiment_results import ArmResult

    sft = {s: arm_summary([_agg({"a": 0.2, "b": 0.4, "c": 0.3})], STAGES, 0.95) for s in ("final", "test")}
    rl = {s: arm_summary([_agg({"a": 0.5, "b": 0.6, "c": 0.4})], STAGES, 0.95) for s in ("final", "test")}
    arms = {
        "base": ArmResult(kind="base", rl=False, summaries={}, summary=arm_summary([], STAGES, 0.95)),
        "sft": ArmResult(kind="trained", rl=False, summaries=sft, summary=sft["final"]),
        "bicurl": ArmResult(kind="trained", rl=True, summaries=rl, summary=rl["final"]),
    }
    profile = held_out_profile(arms, STAGES, 0.95)
    assert profile is not None and profile.before == "sft" and set(profile.splits) == {"final", "test"}
    s1 = profile.splits["test"]["bicurl"]["S1"]
    assert s1.before == pytest.approx(0.3) and s1.after == pytest.approx(0.5)
    assert s1.change is not None and s1.change.deltas == pytest.approx({"a": 0.3, "b": 0.2, "c": 0.1})
    assert held_out_profile({"bicurl": arms["bicurl"]}, STAGES, 0.95) is None  # no SFT arm: nothing to start from

    results = ExperimentResults(
        report_split="final",
        reference_arm="bicurl",
        stage_keys=STAGES,
        arms=arms,
        comparisons={"sft": compare(rl["final"], sft["final"], 0.95), "base": None},
        comparisons_by_split={"test": {"sft": compare(rl["test"], sft["test"], 0.95), "base": None}},
        held_out_profile=profile,
    )
    table = "\n".join(held_out_profile_table(results))
    assert "| test | bicurl | 30.0 -> 50.0 (+20.0 ± " in table and "| final | sft |" not in table
    other = "\n".join(other_split_tables(results))
    assert "on the **test** split" in other and "| bicurl | 50.0 ± " in other and "**final**" not in other
    note = _closing_note(results)
    assert "on the final split: bicurl (50.0) > sft (30.0)" in note
    assert "on the test split: bicurl (50.0) > sft (30.0)" in note and note.count("bicurl − sft: +20.0 points") == 2

    signal = [{"round": 1, "route": "continue", "kl": 0.0262}, {"round": 2, "route": "fallback", "kl": 0.1357}]
    seed_run = SeedRun(seed=1, signal=[*signal, {"round": 3}])
    assert route_cells(seed_run) == "continue (0.026) / fallback (0.136) / -"
    assert route_cells(SeedRun(seed=1, signal=[])) == ""


def test_a_record_predating_a_budget_field_counts_as_the_value_runs_had_then() -> None:
    from bat.experiment.budget_audit import mark_stale
    from bat.experiment.spec import BUDGET_FIELD_DEFAULTS, BUDGET_FIELDS

    assert set(BUDGET_FIELD_DEFAULTS) <= set(BUDGET_FIELDS)
    expected = {"grpo.lr": 5e-5, "grpo.optimizer": "adamw"}
    earlier = SeedRun(seed=1, status="done", budget={"grpo.lr": 5e-5})  # before grpo.optimizer existed (AdamW)
    mark_stale(earlier, expected)
    assert earlier.status == "done" and "stale_fields" not in earlier.to_json()
    mark_stale(earlier, {**expected, "grpo.optimizer": "sgd"})
    assert earlier.status == "stale" and earlier.stale_fields == {"grpo.optimizer": ["adamw", "sgd"]}
    # every RL run before grpo.grad_clip was a budget field clipped at the package default, 1.0
    clipped = SeedRun(seed=1, status="done", budget={"grpo.lr": 5e-5})
    mark_stale(clipped, {**expected, "grpo.grad_clip": 1.0})
    assert clipped.status == "done"
    mark_stale(clipped, {**expected, "grpo.grad_clip": 0.25})
    assert clipped.stale_fields == {"grpo.grad_clip": [1.0, 0.25]}
    unknown = SeedRun(seed=1, status="done", budget={})  # a field without a recorded default still makes it stale
    mark_stale(unknown, {"grpo.lr": 5e-5})
    assert unknown.stale_fields == {"grpo.lr": [None, 5e-5]}


def test_the_pool_signal_table_shows_each_rounds_step_gradient_norm() -> None:
    from bat.experiment.runs_report import pool_signal_table

    pools = {"E2E": {"groups": 4, "groups_identical": 1, "reward_mean": 0.1, "rewards": 32}}
    rounds = [{"round": 1, "by_pool": pools, "grad_norm": 0.44213, "adv_uncancelled": 0.2042}]
    rounds.append({"round": 2, "by_pool": pools})
    results = _results({"arms": {"grpo": {"seeds": [{"seed": 1, "signal": rounds}]}}})
    rows = [line for line in pool_signal_table(results) if line.startswith("| grpo |")]
    assert rows == [
        "| grpo | 1 | 1 | - | - | 0.100 (1/4 same) | 0.442 | 0.204 |",
        "| grpo | 1 | 2 | - | - | 0.100 (1/4 same) | - | - |",  # a record made before they were kept
    ]


def test_a_rounds_signal_carries_its_grpo_steps_gradient_norm(tmp_path) -> None:
    from bat.experiment.collect import _counts
    from bat.state.jsonl import write_jsonl
    from bat.state.layout import RunLayout
    from bat.state.markers import write_done

    layout = RunLayout(tmp_path / "run")
    layout.ensure()
    for phase in ("verify", "grpo"):
        layout.phase_dir(1, phase).mkdir(parents=True)
    write_done(layout.phase_dir(1, "verify"), phase="verify", config_hash="h", counts={"reward_mean": 0.5})
    counts = {"step": 1, "groups": 4, "groups_identical_rewards": 1}
    write_done(layout.phase_dir(1, "grpo"), phase="grpo", config_hash="h", counts=counts)
    steps = [
        {"step": 1, "grad_norm": 0.9, "adv_uncancelled": 0.5},
        {"step": 2, "grad_norm": 0.44, "adv_uncancelled": 0.0},
    ]
    write_jsonl(layout.training_metrics(1, "grpo"), steps)  # the grpo phase's own record of its steps
    [signal] = _counts(layout).signal
    assert signal.round == 1 and signal.reward_mean == 0.5
    assert (signal.groups, signal.groups_identical, signal.grad_norm) == (4, 1, 0.44)  # the last step's
    assert signal.adv_uncancelled == 0.0


def test_the_stall_table_sums_each_arms_finished_seeds_per_split() -> None:
    from bat.experiment.stage_report import stall_table
    from bat.schemas.breakdown import FailureSummary

    def seed(status: str, finished: int, s3: int, first: dict[str, int]) -> dict:
        failures = {"runs": finished + s3, "stalled": {"finished": finished, "S3": s3}, "first_failures": first}
        final = _agg({"a": 0.1}).model_copy(update={"failures": FailureSummary(**failures)})
        return {"status": status, "aggregates": {"final": final, "test": _agg({"a": 0.1})}}

    results = _results(
        {
            "stage_keys": ["S1", "S2", "S3"],
            "report_split": "final",
            "arms": {
                "grpo": {
                    "seeds": [seed("done", 6, 14, {"repeat": 12}), seed("done", 5, 15, {"repeat": 9, "tool_error": 2})]
                },
                "old": {"seeds": [{"status": "done", "aggregates": {"final": _agg({"a": 0.1})}}]},
                "stale": {"seeds": [seed("stale", 9, 11, {"repeat": 1})]},
            },
        }
    )
    lines = stall_table(results)
    assert lines[1] == "## Where end-of-run runs stall"
    rows = [x for x in lines if x.startswith("| final")]
    assert rows == ["| final | grpo | 2 | 40 | 11 | 0 | 0 | 29 | repeat 21, tool_error 2 |"]
    assert stall_table(results.model_copy(update={"arms": {"old": results.arms["old"]}})) == []
