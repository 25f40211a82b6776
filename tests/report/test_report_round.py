"""Round report from training-side files: scores with half-widths, final split, decision, phases, plots, CLI."""

import pytest

from bat.cli.main import main
from bat.config.root import BatConfig
from bat.curriculum.arms import resolve_arm
from bat.curriculum.decide import History, decide
from bat.curriculum.history import best_after_path, decision_path
from bat.evaluate.store import write_aggregate
from bat.report.round_report import write_round_report
from bat.report.summary import run_summary
from bat.schemas.evaluation import EvalAggregate, TrackAggregate
from bat.state.atomic import atomic_write_json, read_json
from bat.state.layout import RunLayout
from bat.state.markers import write_done

STAGES = ("S1", "S2", "S3", "S4", "S5")
CFG = BatConfig()


def _agg(r, overall, split="controller"):
    tracks = {
        t: TrackAggregate(track=t, n_runs=3, overall=overall + d, task=overall + d, agentic=overall + d)
        for t, d in (("classification", -0.02), ("detection", 0.0), ("vqa", 0.02))
    }
    return EvalAggregate(
        round=r,
        split=split,
        checkpoint=f"ckpt/r{r}",
        checkpoint_digest="ab" * 32,
        suite_version="suite-1",
        harness_version="h-1",
        manifest_digest="m",
        stage_keys=list(STAGES),
        stages={"S1": 0.9, "S2": 0.8, "S3": 0.1234, "S4": 0.7, "S5": 0.6},
        task=overall,
        agentic=overall,
        overall=overall,
        half_widths={"overall": 0.0123, "S3": 0.05},
        tracks=tracks,
        n_runs=9,
        routable=True,
    )


@pytest.fixture
def layout(tmp_path):
    lay = RunLayout(tmp_path / "run").ensure()
    best, history = None, History()
    for r, overall in enumerate((0.41, 0.47)):
        agg = _agg(r, overall)
        write_aggregate(lay, agg)
        decision, best = decide(
            round_index=r,
            arm=resolve_arm(CFG.curriculum),
            cfg=CFG.curriculum,
            stage_keys=STAGES,
            candidate=agg,
            best=best,
            history=history,
        )
        atomic_write_json(decision_path(lay, r), decision)
        atomic_write_json(best_after_path(lay, r), best)
        history = History(previous_overall=overall, drop_counter=decision.drop_counter, previous=decision.candidate)
    write_aggregate(lay, _agg(1, 0.45, split="final"))
    write_done(lay.phase_dir(1, "grpo"), phase="grpo", config_hash="h", round_index=1, extra={"wall_s": 12.5})
    return lay


def test_round_report_contents(layout):
    paths = write_round_report(layout, 1, CFG)
    assert [p.name for p in paths] == ["report.json", "report.md", "overall.png", "stages.png"]
    md = layout.report_md(1).read_text()
    assert "| Overall | 47.0 ± 1.2 | +6.0 |" in md  # 0-100, one decimal, delta from unrounded values
    assert "| S3 | 12.3 ± 5.0 | +0.0 |" in md
    assert "Final evaluation (disjoint runs; never used for routing)" in md and "Overall 45.0" in md
    assert "**promote**" in md and "target stage: S3 (rule `lowest`)" in md
    assert "S-target 4, S-mix 2, E2E 2" in md
    assert "| grpo | done |" in md and "12.5" in md and "| rollout | pending |" in md
    for png in paths[2:]:
        assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 5000


def test_run_summary_and_cli(layout, capsys):
    rows = run_summary(layout)
    assert [(r["round"], r["overall"], r["best"], r["action"], r["target"]) for r in rows] == [
        (0, "41.0", "41.0", "bootstrap", "S3"),
        (1, "47.0", "47.0", "promote", "S3"),
    ]
    assert main(["report", "--state", str(layout.root)]) == 0
    out = capsys.readouterr().out
    assert "report.md" in out and "47.0" in out
    assert layout.report_md(0).exists()
    assert main(["report", "--state", str(layout.root), "--round", "7"]) == 2
    assert "rounds on disk: [0, 1]" in capsys.readouterr().out


def test_round_report_rebuilds_tensorboard_events(layout):
    """SFT, GRPO (steps counted across rounds, reward by pool) and controller scores land in event files, and a
    second report rebuilds them instead of adding duplicate points."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from bat.state.jsonl import write_jsonl

    write_jsonl(
        layout.phase_dir(0, "sft") / "metrics.jsonl",
        [
            {"step": 0, "val_loss": 1.2},
            {"step": 1, "loss": 0.9, "grad_norm": 3.0, "lr": 1e-4},
            {"step": 2, "loss": 0.7, "grad_norm": 2.0, "lr": 1e-4, "val_loss": 0.8},
        ],
    )
    write_jsonl(
        layout.phase_dir(1, "grpo") / "metrics.jsonl",
        [
            {
                "step": 1,
                "loss": 0.1,
                "kl": 0.01,
                "clip_frac": 0.0,
                "reward_mean": 0.25,
                "reward_mean_by_pool": {"S-target": 0.5, "E2E": 0.0},
            },
            {"step": 2, "loss": 0.2, "kl": 0.02, "clip_frac": 0.1, "reward_mean": 0.5, "reward_mean_by_pool": {}},
        ],
    )
    for _ in range(2):
        write_round_report(layout, 1, CFG)

    def scalars(kind, tag):
        acc = EventAccumulator(str(layout.tensorboard_dir / kind))
        acc.Reload()
        return [(e.step, round(e.value, 4)) for e in acc.Scalars(tag)]

    assert scalars("sft", "sft/loss") == [(1, 0.9), (2, 0.7)]
    assert scalars("sft", "sft/val_loss") == [(0, 1.2), (2, 0.8)]
    assert scalars("grpo", "grpo/kl") == [(1, 0.01), (2, 0.02)]
    assert scalars("grpo", "grpo/reward_by_pool/S-target") == [(1, 0.5)]
    md = layout.report_md(1).read_text()
    assert "## RL steps" in md and "| 2 | 0.500 | - |" in md
    assert [row["step"] for row in read_json(layout.report_json(1))["grpo_steps"]] == [1, 2]
    assert scalars("eval", "controller/overall") == [(0, 0.41), (1, 0.47)]
    assert scalars("eval", "controller/stage/S3") == [(0, 0.1234), (1, 0.1234)]
    assert not list(layout.root.glob(".tensorboard-*"))


def test_overall_error_bars_stay_inside_the_score_range():
    from bat.report.plots import clipped_errors

    below, above = clipped_errors([2.0, 50.0, 97.0, 0.0], [10.0, 10.0, 10.0, 5.0])
    assert below == [2.0, 10.0, 10.0, 0.0] and above == [10.0, 10.0, 3.0, 5.0]


def test_overall_plot_shows_the_base_policy_left_of_round_zero(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    from bat.report import plots
    from bat.report.summary import RoundView
    from bat.schemas.evaluation import EvalAggregate

    def agg(overall, hw):
        return EvalAggregate.model_construct(overall=overall, half_widths={"overall": hw}, stages={})

    views = [RoundView(0, agg(0.2, 0.3), None, None, None, None, {}, base=agg(0.01, 0.02))]
    seen = {}
    save = plots._save

    def keep(fig: Figure, path):
        ax = fig.axes[0]
        seen["ticks"] = [t.get_text() for t in ax.get_xticklabels()]
        seen["ylim"] = ax.get_ylim()
        seen["labels"] = ax.get_legend_handles_labels()[1]
        return save(fig, path)

    monkeypatch.setattr(plots, "_save", keep)
    out = plots.plot_overall(views, tmp_path / "overall.png")
    assert out.read_bytes()[:4] == b"\x89PNG"
    assert seen["ticks"] == ["base", "SFT"] and seen["ylim"] == (0.0, 100.0)
    assert "base policy (before SFT)" in seen["labels"]
