"""The RL part of the round report: the GRPO curve read from metrics.jsonl, the two-panel overall.png (held-out
Overall per policy, training reward per step by pool) and the "RL steps" table."""

import pytest
from matplotlib.figure import Figure

from bat.report import plots
from bat.report.rl_steps import grpo_curve, step_lines
from bat.report.summary import RoundView
from bat.schemas.evaluation import EvalAggregate
from bat.state.jsonl import write_jsonl
from bat.state.layout import RunLayout


def _row(step, reward, pools, **extra):
    return {"step": step, "reward_mean": reward, "reward_mean_by_pool": pools, **extra}


ROUND_1 = [
    _row(1, 0.10, {"S-target": 0.10}, groups=1, groups_identical=1, kl=0.0, grad_norm=0.51, clip_frac=0.0),
    _row(2, 0.25, {"S-target": 0.25}, groups=1, groups_identical=0, kl=0.0021, grad_norm=0.75, clip_frac=0.01),
    _row(3, 0.40, {"S-target": 0.40}, groups_identical=0, kl=0.0042, grad_norm=0.62, clip_frac=0.02),
]
ROUND_2 = [
    _row(1, 0.30, {"S-target": 0.5, "E2E": 0.1}, rollout_seconds=41.2, train_seconds=17.9),
    {"step": 2, "loss": 0.0},  # a step with nothing trainable: no reward
]


@pytest.fixture
def layout(tmp_path):
    lay = RunLayout(tmp_path / "run").ensure()
    for r in range(3):
        lay.round_dir(r).mkdir(parents=True, exist_ok=True)
    write_jsonl(lay.training_metrics(0, "sft"), [{"step": 1, "loss": 1.0}])
    write_jsonl(lay.training_metrics(1, "grpo"), ROUND_1)
    write_jsonl(lay.training_metrics(2, "grpo"), ROUND_2)
    return lay


def test_curve_counts_steps_across_rounds(layout):
    curve = grpo_curve(layout)
    assert [(p.round, p.step, p.x) for p in curve] == [(1, 1, 1), (1, 2, 2), (1, 3, 3), (2, 1, 4), (2, 2, 5)]
    assert [p.reward for p in curve] == [0.10, 0.25, 0.40, 0.30, None]
    assert curve[3].by_pool == {"E2E": 0.1, "S-target": 0.5} and curve[4].by_pool == {}
    assert [p.x for p in grpo_curve(layout, upto_round=1)] == [1, 2, 3]
    assert grpo_curve(layout, upto_round=0) == []


def test_step_table_lists_every_step_with_its_pools():
    lines = step_lines(ROUND_1)
    assert lines[0] == "## RL steps"
    assert "mean reward 0.100 at the first step, 0.400 at the last, 0.250 over all" in lines[2]
    assert lines[4].startswith("| step | reward | S-target | identical groups | KL | grad norm | clip frac |")
    assert lines[6] == "| 1 | 0.100 | 0.100 | 1 | 0.0000 | 0.510 | 0.000 | - | - |"
    two = step_lines(ROUND_2)
    assert "| 1 | 0.300 | 0.100 | 0.500 | - | - | - | - | 41 | 18 |" in two
    assert "| 2 | - | - | - | - | - | - | - | - | - |" in two
    assert step_lines([]) == []


def _agg(overall):
    return EvalAggregate.model_construct(overall=overall, half_widths={"overall": 0.05}, stages={})


def _drawn(monkeypatch):
    seen = {}
    save = plots._save

    def keep(fig: Figure, path):
        seen["fig"] = fig
        return save(fig, path)

    monkeypatch.setattr(plots, "_save", keep)
    return seen


def test_overall_plot_has_policy_scores_left_and_reward_curve_right(layout, tmp_path, monkeypatch):
    seen = _drawn(monkeypatch)
    views = [
        RoundView(0, _agg(0.394), None, None, None, None, {}, base=_agg(0.0)),
        RoundView(1, _agg(0.45), None, None, None, None, {}),
    ]
    out = plots.plot_overall(views, tmp_path / "overall.png", curve=grpo_curve(layout))
    assert out.read_bytes()[:4] == b"\x89PNG" and out.stat().st_size > 5000
    left, right = seen["fig"].axes
    assert [t.get_text() for t in left.get_xticklabels()] == ["base", "SFT", "RL 1"]
    assert {t.get_text() for t in left.texts} == {"0.0", "39.4", "45.0"}
    lines = {line.get_label(): line for line in right.get_lines() if not line.get_label().startswith("_")}
    assert sorted(lines) == ["E2E rollouts", "S-target rollouts", "all rollouts"]
    assert list(lines["S-target rollouts"].get_xdata()) == [1, 2, 3, 4]
    assert list(lines["S-target rollouts"].get_ydata()) == [0.10, 0.25, 0.40, 0.5]
    assert list(lines["E2E rollouts"].get_xdata()) == [4]
    assert list(lines["all rollouts"].get_ydata()) == [0.10, 0.25, 0.40, 0.30]
    assert sorted(t.get_text() for t in right.texts) == ["round 1", "round 2"]
    (crosses,) = [c for c in right.collections if c.get_label().startswith("no signal")]
    assert crosses.get_offsets().tolist() == [[1.0, 0.10]]  # step 1: its one group had equal rewards
    assert right.get_ylim()[0] == 0.0 and right.get_ylim()[1] >= 1.0


def test_one_pool_draws_one_line_and_no_rl_says_so(layout, tmp_path, monkeypatch):
    seen = _drawn(monkeypatch)
    views = [RoundView(0, _agg(0.2), None, None, None, None, {})]
    plots.plot_overall(views, tmp_path / "a.png", curve=grpo_curve(layout, upto_round=1))
    labels = [line.get_label() for line in seen["fig"].axes[1].get_lines() if not line.get_label().startswith("_")]
    assert labels == ["S-target rollouts"]
    plots.plot_overall(views, tmp_path / "b.png")
    assert [t.get_text() for t in seen["fig"].axes[1].texts] == ["no RL step yet"]
    assert [t.get_text() for t in seen["fig"].axes[0].get_xticklabels()] == ["SFT"]
