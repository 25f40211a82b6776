"""The evaluate / final_test phases on the real offline benchmark (scripted agents and the tiny HF policy)."""

import json
import shutil

import pytest

from bat.benchmark.secret import HeldoutSecret, install_secret, run_secret
from bat.config import parse_config
from bat.evaluate.episodes import EpisodeInfo, policy_driver, scripted_driver
from bat.evaluate.phase import run_evaluate, run_final_test
from bat.evaluate.runner import evaluate_split
from bat.evaluate.store import heldout_manifest_path, heldout_runs_path, load_aggregate, partial_runs_path
from bat.orchestrate.runner import run_phase
from bat.phase.context import PhaseContext
from bat.schemas.evaluation import EvalManifest, EvalRun
from bat.state.atomic import read_json
from bat.state.checkpoints import write_best
from bat.state.jsonl import append_jsonl, read_jsonl
from bat.state.layout import RunLayout

BASE = {"benchmark": {"tracks": ["classification", "vqa"], "repeats": 2, "runtime": "inprocess"}, "run": {"rounds": 0}}


def _cfg(**evaluate):
    return parse_config({**BASE, "evaluate": {"agent": "expert", **evaluate}})


@pytest.fixture
def layout(tmp_path):
    """A run whose held-out secret is fixed, so that its held-out instances (and the scripted expert's exact scores
    on them) are the same in every test session; a fresh secret per run draws new instances each time."""
    lay = RunLayout(tmp_path / "run").ensure()
    source = tmp_path / "SECRET"
    source.write_text(HeldoutSecret.from_text("tests").key + "\n", encoding="ascii")
    install_secret(source, lay.heldout_secret)
    return lay


def test_evaluate_phase_writes_aggregates_and_heldout_records(layout):
    cfg = _cfg()
    result = run_evaluate(PhaseContext(config=cfg, layout=layout, round=0, phase="evaluate"))
    assert result.counts["controller_runs"] == 4 and result.counts["final_runs"] == 4  # last round: final split too
    agg = load_aggregate(layout, 0, "controller")
    assert agg.overall == pytest.approx(1.0) and agg.routable and set(agg.tracks) == {"classification", "vqa"}
    assert agg.checkpoint == "scripted:expert" and agg.suite_version and agg.harness_version
    runs = read_jsonl(heldout_runs_path(layout, 0, "controller"), EvalRun)
    manifest = EvalManifest.model_validate(read_json(heldout_manifest_path(layout, 0, "controller")))
    assert [r.run_id for r in manifest.runs] == sorted(r.run_id for r in runs)
    assert all(e.seed and e.instance_id for e in manifest.runs)
    text = (layout.phase_dir(0, "evaluate") / "aggregate_controller.json").read_text()
    assert not any(r.instance_id in text for r in runs)  # held-out identifiers never reach the training side
    final = read_jsonl(heldout_runs_path(layout, 0, "final"), EvalRun)
    assert {r.seed for r in final}.isdisjoint({r.seed for r in runs})  # final split = disjoint runs
    assert not list(layout.heldout_dir.rglob("work"))  # workspaces cleaned


def test_final_test_runs_once_on_the_retained_best(layout):
    write_best(layout.best_json, "scripted:expert", round_index=0, score=1.0)  # type: ignore[arg-type]
    cfg = _cfg(keep_raw_runs=False)
    ctx = PhaseContext(config=cfg, layout=layout, round=0, phase="final_test")
    result = run_phase(cfg, layout, 0, "final_test")  # the runner writes the round report after the function
    assert result.counts["test_runs"] == 4 and result.counts["test_overall"] == pytest.approx(1.0)
    assert load_aggregate(layout, 0, "test", phase="final_test").split == "test"
    assert not heldout_runs_path(layout, 0, "test").exists() and heldout_manifest_path(layout, 0, "test").exists()
    report = layout.report_md(0).read_text()
    assert "End of run: retained best on the final and untouched test splits" in report
    assert "| test | `scripted:expert` | 100.0" in report
    write_best(layout.best_json, "scripted:noop", round_index=1, score=0.0)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="once per run"):
        run_final_test(ctx)


def test_null_runs_are_retried_then_reported(layout):
    expert = scripted_driver("expert")
    outage = {"controller-vqa-r01"}

    def engine_outage(prepared):  # test double for an engine that is down for one run, on every attempt
        infos = expert(prepared)
        return [
            EpisodeInfo("error", 0, "engine: ConnectionError") if p.run.run_id in outage else i
            for p, i in zip(prepared, infos)
        ]

    agg, _ = evaluate_split(
        _cfg(null_retries=1), layout, 1, "controller", "scripted:expert", engine_outage, config_hash="x"
    )
    assert not agg.routable and agg.overall is None and agg.tracks["vqa"].overall is None
    assert agg.tracks["classification"].overall == pytest.approx(1.0)
    assert {(c.track, c.repeat, c.field) for c in agg.null_cells} >= {("vqa", 1, "task"), ("vqa", 1, "S1")}
    assert all(c.reason == "engine: ConnectionError" for c in agg.null_cells)
    outage.clear()  # the outage is repaired: re-running the evaluation fills the null cells
    agg, _ = evaluate_split(
        _cfg(null_retries=1), layout, 1, "controller", "scripted:expert", engine_outage, config_hash="x"
    )
    assert agg.routable and agg.overall == pytest.approx(1.0)


def test_evaluation_resumes_from_partial_runs(layout):
    cfg = _cfg()
    done = EvalRun(
        run_id="controller-classification-r00",
        split="controller",
        track="classification",
        repeat=0,
        seed=1,
        stages=dict.fromkeys(cfg.stage_keys, 0.5),
        task=0.5,
        agentic=0.5,
        overall=0.5,
    )
    run_secret(layout)  # the run started (bat run creates the held-out secret) before its evaluation was cut off
    append_jsonl(partial_runs_path(layout, 2, "controller"), [done])
    played = []
    expert = scripted_driver("expert")

    def counting(prepared):
        played.extend(p.run.run_id for p in prepared)
        return expert(prepared)

    agg, _ = evaluate_split(cfg, layout, 2, "controller", "scripted:expert", counting, config_hash="x")
    assert "controller-classification-r00" not in played and len(played) == 3
    assert agg.tracks["classification"].overall == pytest.approx(0.75)
    assert not partial_runs_path(layout, 2, "controller").exists()


def test_unknown_agent_and_missing_checkpoint(layout):
    with pytest.raises(ValueError, match="valid"):
        scripted_driver("genius")
    cfg = parse_config({**BASE, "run": {"rounds": 2}})
    with pytest.raises(FileNotFoundError, match="grpo"):
        run_evaluate(PhaseContext(config=cfg, layout=layout, round=1, phase="evaluate"))


@pytest.mark.slow
def test_policy_checkpoint_through_the_rollout_loop(layout, tmp_path, tiny_model_builder):
    cfg = parse_config(
        {
            "benchmark": {"tracks": ["vqa"], "repeats": 1, "runtime": "inprocess"},
            "rollout": {"budgets": {"max_new_tokens_per_turn": 16, "max_assistant_turns": 2, "max_tool_calls": 2}},
        }
    )
    ckpt = tiny_model_builder(cfg.model.tiny, 7)
    driver, close = policy_driver(cfg, ckpt)
    try:
        agg, _written = evaluate_split(cfg, layout, 0, "controller", str(ckpt), driver, config_hash="x")
    finally:
        close()
    assert agg.routable and agg.n_runs == 1 and 0.0 <= agg.overall <= 1.0
    assert len(agg.checkpoint_digest) == 64
    run = json.loads(heldout_runs_path(layout, 0, "controller").read_text().splitlines()[0])
    assert run["end_reason"] in (
        "no_tool_call",
        "max_turns",
        "max_tool_calls",
        "done",
        "context_length",
        "max_response_tokens",
    )


def test_opening_messages_match_the_bank_e2e_prompt_shape():
    from bat.benchmark.prompts import PREAMBLE
    from bat.evaluate.episodes import opening_messages

    messages = opening_messages(parse_config({}), "# Brief\nSegment the organs.")
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"].startswith(PREAMBLE)
    assert all(f"## Stage {k}" in messages[0]["content"] for k in ("S1", "S2", "S3", "S4", "S5"))
    assert messages[1]["content"] == "# Brief\nSegment the organs."


def test_round_zero_also_scores_the_base_policy_once(layout, tmp_path, tiny_model_builder):
    from bat.report.summary import progress_rows, run_views
    from bat.state.markers import write_done

    cfg = parse_config(
        {
            "benchmark": {"tracks": ["vqa"], "repeats": 1, "runtime": "inprocess"},
            "run": {"rounds": 1},
            "rollout": {"budgets": {"max_new_tokens_per_turn": 8, "max_assistant_turns": 1, "max_tool_calls": 1}},
        }
    )
    base = tiny_model_builder(cfg.model.tiny, 7)
    candidate = tiny_model_builder(cfg.model.tiny, 8)
    cfg = cfg.model_copy(update={"model": cfg.model.model_copy(update={"path": str(base)})})
    shutil.copytree(candidate, layout.candidate_model(0))  # the SFT export, where the layout puts it
    candidate = layout.candidate_model(0)
    write_done(layout.phase_dir(0, "sft"), phase="sft", config_hash="x")
    ctx = PhaseContext(config=cfg, layout=layout, round=0, phase="evaluate")
    result = run_evaluate(ctx)
    assert result.counts["base_controller_runs"] == 1 and result.counts["controller_runs"] == 1
    assert result.extra["base_checkpoint"] == str(base)
    base_agg = load_aggregate(layout, 0, "controller", variant="base")
    assert base_agg.checkpoint == str(base) and load_aggregate(layout, 0, "controller").checkpoint == str(candidate)
    assert (layout.heldout_dir / "round_00" / "base" / "controller" / "manifest.json").exists()
    assert [row["label"] for row in progress_rows(run_views(layout))] == ["base policy", "after SFT"]
    runs = layout.heldout_dir / "round_00" / "base" / "controller" / "runs.jsonl"
    before = runs.stat().st_mtime_ns
    again = run_evaluate(ctx)  # a rerun keeps the finished base evaluation
    assert runs.stat().st_mtime_ns == before and again.counts["base_controller_runs"] == 1
    off = cfg.model_copy(update={"evaluate": cfg.evaluate.model_copy(update={"base_model": False})})
    assert (
        "base_controller_runs"
        not in run_evaluate(PhaseContext(config=off, layout=layout, round=0, phase="evaluate")).counts
    )


def test_transcripts_stay_on_the_heldout_side_and_counts_cross(layout):
    cfg = _cfg()
    agg, written = evaluate_split(
        cfg, layout, 0, "controller", "scripted:expert", scripted_driver("expert"), config_hash="x"
    )
    held = layout.heldout_transcripts(0, "controller")
    assert held in written and held.is_relative_to(layout.heldout_dir)
    transcripts = held.read_text().splitlines()
    assert len(transcripts) == 4 and all('"breakdown"' in line for line in transcripts)
    assert agg.failures.runs == 4 and agg.failures.stalled == {"finished": 4}
    assert set(agg.failures.turn_kinds) == {"ok"} and agg.failures.end_reasons == {"done": 4}
    runs = read_jsonl(heldout_runs_path(layout, 0, "controller"), EvalRun)
    text = (layout.phase_dir(0, "evaluate") / "aggregate_controller.json").read_text()
    assert not any(r.instance_id in text for r in runs)  # the counts carry no held-out content
    off = _cfg(keep_transcripts=False)
    agg, written = evaluate_split(
        off, layout, 1, "controller", "scripted:expert", scripted_driver("expert"), config_hash="x"
    )
    assert agg.failures.runs == 4 and not layout.heldout_transcripts(1, "controller").exists()
