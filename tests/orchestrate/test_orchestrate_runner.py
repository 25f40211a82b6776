"""run_phase: DONE.json written last from the PhaseResult; a DONE phase is a no-op; bad results refused."""

import pytest
import toy_phases

from bat.config import config_hash
from bat.orchestrate import runner
from bat.state.layout import RunLayout
from bat.state.markers import read_done


def test_run_phase_writes_done_last_and_rerun_is_noop(tmp_path, monkeypatch):
    cfg = toy_phases.toy_config()
    layout = RunLayout(tmp_path / "run")
    calls = []
    seen_done_during_call = []

    def phase(ctx):
        calls.append(ctx.phase)
        seen_done_during_call.append((ctx.phase_dir / "DONE.json").exists())
        return original(ctx)

    original = toy_phases.synthesize
    monkeypatch.setattr(toy_phases, "synthesize", phase)
    result = runner.run_phase(cfg, layout, 0, "synthesize")
    assert calls == ["synthesize"] and seen_done_during_call == [False]
    done = read_done(layout.phase_dir(0, "synthesize"))
    assert done is not None and done.phase == "synthesize" and done.round == 0
    assert done.config_hash == config_hash(cfg)
    assert done.counts == {"rows": 12.0} == {k: float(v) for k, v in result.counts.items()}
    assert sorted(done.outputs) == [f"round_00/synthesize/shard_{i:03d}.jsonl" for i in range(4)]
    assert all(len(d) == 64 for d in done.outputs.values())
    assert done.extra["compute_s"] >= 0
    assert runner.run_phase(cfg, layout, 0, "synthesize") is None
    assert calls == ["synthesize"]
    assert "already DONE" in (layout.root / "events.log").read_text()


def test_resumed_phase_equals_uninterrupted(tmp_path, monkeypatch):
    cfg = toy_phases.toy_config()
    ref, resumed = RunLayout(tmp_path / "ref"), RunLayout(tmp_path / "res")
    runner.run_phase(cfg, ref, 0, "synthesize")
    # a partial run: two shards finished, then the process died (no DONE.json)
    monkeypatch.setenv("BAT_TOY_SHARDS", "2")
    toy_phases.synthesize(runner.PhaseContext(cfg, resumed, 0, "synthesize"))
    assert read_done(resumed.phase_dir(0, "synthesize")) is None
    monkeypatch.setenv("BAT_TOY_SHARDS", "4")
    runner.run_phase(cfg, resumed, 0, "synthesize")
    assert toy_phases.output_digests(ref.root) == toy_phases.output_digests(resumed.root)
    assert toy_phases.row_count(resumed.root) == 12


def test_phase_must_return_phase_result(tmp_path, monkeypatch):
    cfg = toy_phases.toy_config()
    monkeypatch.setattr(toy_phases, "scan", lambda ctx: {"rows": 1})
    with pytest.raises(TypeError, match="returned dict, not PhaseResult"):
        runner.run_phase(cfg, RunLayout(tmp_path), 0, "scan")
    assert read_done(RunLayout(tmp_path).phase_dir(0, "scan")) is None


def test_unknown_phase_lists_valid_ones(tmp_path):
    with pytest.raises(KeyError, match="unknown phase 'train'.*'grpo'"):
        runner.run_phase(toy_phases.toy_config(), RunLayout(tmp_path), 0, "train")


def test_failing_phase_leaves_no_marker(tmp_path, monkeypatch):
    cfg = toy_phases.toy_config()

    def boom(ctx):
        raise RuntimeError("disk full")

    monkeypatch.setattr(toy_phases, "sft", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        runner.run_phase(cfg, RunLayout(tmp_path), 0, "sft")
    assert read_done(RunLayout(tmp_path).phase_dir(0, "sft")) is None


def test_route_can_end_the_run_before_the_budget(tmp_path, monkeypatch, capsys):
    from bat.orchestrate import driver

    monkeypatch.setenv("BAT_TOY_STOP_AT", "1")
    cfg = toy_phases.toy_config("debug", rounds=3)
    layout = RunLayout(tmp_path / "run")
    assert driver.run(cfg, layout) == 0
    assert driver.next_round(cfg, layout) is None
    assert layout.rounds() == [0, 1]  # rounds 2 and 3 never started
    assert "round 1 finished" in capsys.readouterr().out
    assert driver.route_stopped(layout, 1)
    assert not driver.route_stopped(layout, 0)


def test_async_bank_refresh_runs_beside_rounds(tmp_path):
    from bat.orchestrate import driver
    from bat.orchestrate.status import collect_status

    cfg = toy_phases.toy_config("debug", rounds=1, extra=["orchestrate.bank_refresh=true"])
    layout = RunLayout(tmp_path / "run")
    assert driver.run(cfg, layout) == 0
    digests = toy_phases.output_digests(layout.root)
    assert "round_01/synthesize" in digests and "round_01/scan" in digests
    assert digests["round_01/synthesize"] != digests["round_00/synthesize"]  # a new bank refresh, own seeds
    round1 = collect_status(layout, query_slurm=False)["rounds"][1]["phases"]
    assert list(round1) == ["rollout", "verify", "grpo", "evaluate", "route", "synthesize", "scan"]
    assert all(cell["status"] == "done" for cell in round1.values())


def test_a_product_phase_that_skips_a_declared_write_fails_without_done(tmp_path):
    from dataclasses import replace

    from bat.phase.context import PhaseResult
    from bat.phase.spec import Maybe, PhaseSpec

    layout = RunLayout(tmp_path / "run")
    cfg = toy_phases.toy_config()
    wrote: list[str] = []

    def synthesize(ctx):
        for name in wrote:
            (ctx.phase_dir / name).write_text("{}")
        return PhaseResult()

    spec = PhaseSpec(
        "synthesize",
        synthesize,
        reads=lambda L, r: (),
        writes=lambda L, r: (
            L.phase_dir(r, "synthesize") / "a.json",
            Maybe(L.phase_dir(r, "synthesize") / "b.json", "never here"),
            "something that is not a file",
        ),
        resources="synthesize",
    )
    with pytest.raises(runner.PhaseOutputMissing, match=r"synthesize .*a\.json.*no DONE\.json"):
        runner.run_phase(cfg, layout, 0, "synthesize", table={"synthesize": spec})
    assert read_done(layout.phase_dir(0, "synthesize")) is None
    stand_in = replace(spec, product=False)  # an override is not held to the product's outputs
    assert runner.run_phase(cfg, RunLayout(tmp_path / "other"), 0, "synthesize", table={"synthesize": stand_in})
    wrote.append("a.json")
    assert runner.run_phase(cfg, layout, 0, "synthesize", table={"synthesize": spec}) is not None
    assert read_done(layout.phase_dir(0, "synthesize")) is not None
