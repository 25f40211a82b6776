"""The evaluate and final_test phases on a plug-in benchmark (`benchmark.name: sqlqa`) through the interface."""

import pytest

from bat.benchmark.secret import HeldoutSecret, install_secret
from bat.config import parse_config
from bat.evaluate.episodes import scripted_driver
from bat.evaluate.phase import run_evaluate
from bat.evaluate.runner import evaluate_split
from bat.evaluate.store import heldout_runs_path, load_aggregate
from bat.orchestrate.runner import run_phase
from bat.phase.context import PhaseContext
from bat.schemas.evaluation import EvalRun
from bat.state.checkpoints import write_best
from bat.state.jsonl import read_jsonl
from bat.state.layout import RunLayout

STAGES = {"inspect", "draft", "validate", "submit"}


@pytest.fixture
def layout(tmp_path):
    lay = RunLayout(tmp_path / "run").ensure()
    (tmp_path / "SECRET").write_text(HeldoutSecret.from_text("sqlqa-tests").key + "\n", encoding="ascii")
    install_secret(tmp_path / "SECRET", lay.heldout_secret)
    return lay


def _cfg(agent="expert", **benchmark):
    return parse_config(
        {"benchmark": {"name": "sqlqa", "repeats": 2, **benchmark}, "run": {"rounds": 0}, "evaluate": {"agent": agent}}
    )


def test_scripted_agents_on_the_plugin_heldout_split(layout):
    agg, _ = evaluate_split(
        _cfg(), layout, 0, "controller", "scripted:expert", scripted_driver("expert"), config_hash="x"
    )
    assert agg.overall == pytest.approx(1.0) and agg.routable and agg.n_runs == 6
    assert set(agg.tracks) == {"count", "total", "join"} and set(agg.stages) == STAGES
    assert agg.suite_version == "sqlqa-1"
    runs = read_jsonl(heldout_runs_path(layout, 0, "controller"), EvalRun)
    assert all(r.instance_id.startswith("hq-") and set(r.stages) == STAGES for r in runs)
    assert [r.run_id for r in runs][:2] == ["controller-count-r00", "controller-count-r01"]
    failing, _ = evaluate_split(
        _cfg(tracks=["join"]), layout, 1, "controller", "scripted:failure", scripted_driver("failure"), config_hash="x"
    )
    assert set(failing.tracks) == {"join"} and failing.overall < 1.0 and failing.stages["inspect"] == 0.5


def test_evaluate_and_final_test_phases_report_the_plugins_stages(layout):
    cfg = _cfg()
    result = run_evaluate(PhaseContext(config=cfg, layout=layout, round=0, phase="evaluate"))
    assert result.counts["controller_runs"] == 6 and result.counts["final_runs"] == 6
    assert load_aggregate(layout, 0, "final").overall == pytest.approx(1.0)
    write_best(layout.best_json, "scripted:expert", round_index=0, score=1.0)  # type: ignore[arg-type]
    assert run_phase(cfg, layout, 0, "final_test").counts["test_runs"] == 6
    report = layout.report_md(0).read_text()
    assert "| test | `scripted:expert` | 100.0" in report
    assert all(key in report for key in STAGES)


def test_builtin_evaluation_keeps_its_pre_interface_scores(tmp_path):
    """Per-track Overall computed by the evaluation before it went through the interface (commit 6713354, the
    controller split of 7 tracks x 2 repeats under this secret); the same seeds give the same scores."""
    lay = RunLayout(tmp_path / "run").ensure()
    (tmp_path / "S").write_text(HeldoutSecret.from_text("ref").key + "\n", encoding="ascii")
    install_secret(tmp_path / "S", lay.heldout_secret)
    tracks = ["enhancement", "synthesis"]
    cfg = parse_config({"benchmark": {"repeats": 2, "runtime": "inprocess", "tracks": tracks}, "run": {"rounds": 0}})
    pinned = {"failure": (0.35, 0.3564738151077391), "recovery": (0.9888812530657366, 0.9911698792995904)}
    for index, (agent, overall) in enumerate(pinned.items()):
        agg, _ = evaluate_split(
            cfg, lay, index, "controller", f"scripted:{agent}", scripted_driver(agent), config_hash="x"
        )
        assert tuple(agg.tracks[t].overall for t in tracks) == overall
        assert (agg.suite_version, agg.harness_version) == ("builtin-2", "builtin-grader-1")
