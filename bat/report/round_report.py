"""Round report: `round_NN/report.md` + `report.json` (+ `overall.png`, `stages.png`), training-side files only.

Scores on 0-100 with one decimal; differences computed from unrounded values and rounded once.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.curriculum.mixture import POOL_ORDER
from bat.evaluate.aggregate import pct, pct_delta
from bat.phase.order import BOOTSTRAP_ORDER, ROUND_ORDER
from bat.report.plots import plot_overall, plot_stages
from bat.report.rl_steps import grpo_curve, metric_rows, step_lines
from bat.report.summary import RoundView, progress_rows, round_view, run_views
from bat.rollout.breakdown import format_summary, summarise
from bat.rollout.shards import finished_shards, read_breakdown
from bat.schemas.breakdown import FailureSummary
from bat.schemas.evaluation import EvalAggregate
from bat.state.atomic import atomic_write_json, atomic_write_text, read_json
from bat.state.layout import RunLayout
from bat.state.markers import read_done
from bat.state.round_layout import ROLLOUT_PHASE

if TYPE_CHECKING:
    from bat.config.root import BatConfig


def _hw(agg: EvalAggregate, key: str) -> str:
    value = agg.half_widths.get(key)
    return "" if value is None else f" ± {100 * value:.1f}"


LEAKAGE_KEYS = ("verdict", "rows_scanned", "rows_flagged", "files_scanned", "max_similarity")


def leakage_summary(layout: RunLayout, bank_version: int | None) -> dict[str, Any]:
    """Verdict, scan counts and total hits of the pinned bank version's `leakage.json` (no findings text)."""
    if bank_version is None:
        return {}
    path = layout.bank_version(bank_version).leakage_report
    if not path.exists():
        return {"bank_version": bank_version, "verdict": "not scanned"}
    data = read_json(path)
    summary: dict[str, Any] = {k: data[k] for k in LEAKAGE_KEYS if k in data}
    hits = data.get("hits_by_kind")
    if isinstance(hits, dict):
        summary["hits"] = sum(v for v in hits.values() if isinstance(v, (int, float)))
    summary["bank_version"] = bank_version
    return summary


def phase_times(layout: RunLayout, round_index: int) -> dict[str, dict[str, Any]]:
    """Per phase of the round: finished_at and seconds (DONE extra `compute_s` from the phase runner, else
    `wall_s`/`seconds`)."""
    out: dict[str, dict[str, Any]] = {}
    for phase in BOOTSTRAP_ORDER if round_index == 0 else ROUND_ORDER:
        done = read_done(layout.phase_dir(round_index, phase))
        if done is None:
            out[phase] = {"status": "pending"}
            continue
        wall = next((done.extra[k] for k in ("compute_s", "wall_s", "seconds") if k in done.extra), None)
        out[phase] = {"status": "done", "finished_at": done.finished_at, "wall_s": wall}
    return out


def report_data(layout: RunLayout, round_index: int, cfg: BatConfig) -> dict[str, Any]:
    """The JSON report: controller/final aggregates, decision, plan lineage, leakage summary, phase times, and the
    round's GRPO step metrics (`grpo_steps`: reward by pool, identical groups, KL, gradient norm, clip fraction)."""
    view = round_view(layout, round_index)
    plan = view.plan
    return {
        "run": cfg.run.name,
        "round": round_index,
        "arm": cfg.curriculum.arm,
        "controller": view.controller.model_dump(mode="json") if view.controller else None,
        "final": view.final.model_dump(mode="json") if view.final else None,
        "end_of_run": {split: agg.model_dump(mode="json") for split, agg in view.end_of_run.items()},
        "base_controller": view.base.model_dump(mode="json") if view.base else None,
        "progress": progress_rows([v for v in run_views(layout) if v.round <= round_index]),
        "decision": view.decision.model_dump(mode="json") if view.decision else None,
        "best": view.best.model_dump(mode="json") if view.best else None,
        "plan": plan.model_dump(mode="json", exclude={"batches"}) if plan else None,
        "lineage": {
            "start_checkpoint": plan.start_checkpoint if plan else None,
            "candidate": view.controller.checkpoint if view.controller else None,
            "candidate_digest": view.controller.checkpoint_digest if view.controller else None,
            "retained_best": view.best.checkpoint if view.best else None,
            "next_start": view.decision.start_checkpoint if view.decision else None,
        },
        "leakage": leakage_summary(layout, plan.bank_version if plan else None),
        "phases": phase_times(layout, round_index),
        "rollout_failures": rollout_failures(layout, round_index),
        "grpo_steps": metric_rows(layout.training_metrics(round_index, "grpo")) if round_index > 0 else [],
    }


def rollout_failures(layout: RunLayout, round_index: int) -> dict[str, Any] | None:
    """Counts of the round's rollout breakdowns (every shard written with one), or None when there are none."""
    found = [
        b for shard in finished_shards(layout.round(round_index).phase(ROLLOUT_PHASE)) if (b := read_breakdown(shard))
    ]
    if not found:
        return None
    return summarise([run for b in found for run in b.runs]).model_dump(mode="json")


def _score_lines(view: RoundView, stage_keys: tuple[str, ...]) -> list[str]:
    agg = view.controller
    if agg is None:
        return ["_no controller evaluation yet_", ""]
    ref = view.decision.best_before if view.decision else None
    lines = [
        f"Checkpoint `{agg.checkpoint}` (sha256 {agg.checkpoint_digest[:12]}), suite {agg.suite_version}, "
        f"harness {agg.harness_version}, {agg.n_runs} runs over {len(agg.tracks)} tracks; "
        f"half-widths at {agg.confidence:.0%} across track means.",
        "",
        "| metric | score | vs best |",
        "|---|---|---|",
    ]
    for name in ("overall", "task", "agentic"):
        lines.append(
            f"| {name.capitalize()} | {pct(getattr(agg, name))}{_hw(agg, name)} | "
            f"{pct_delta(getattr(ref, name), getattr(agg, name)) if ref else '-'} |"
        )
    for key in stage_keys:
        if key in agg.stages:
            lines.append(
                f"| {key} | {pct(agg.stages[key])}{_hw(agg, key)} | "
                f"{pct_delta(ref.stages.get(key), agg.stages[key]) if ref else '-'} |"
            )
    lines += ["", "| track | Overall | Task | Agentic | runs | null |", "|---|---|---|---|---|---|"]
    for t, ta in agg.tracks.items():
        lines.append(f"| {t} | {pct(ta.overall)} | {pct(ta.task)} | {pct(ta.agentic)} | {ta.n_runs} | {ta.n_null} |")
    if agg.null_cells:
        lines += [
            "",
            f"**{len(agg.null_cells)} null cell(s): routing stops until repaired.** "
            + ", ".join(f"{c.track}#{c.repeat}:{c.field}" for c in agg.null_cells[:20]),
        ]
    return lines + [""]


def _decision_lines(view: RoundView) -> list[str]:
    d = view.decision
    if d is None:
        return ["_no route decision yet_", ""]
    lines = [
        f"**{d.action}** — {d.reason}",
        "",
        f"* target stage: {d.target_stage or '-'} (rule `{d.rule}`); mixture per batch: "
        + (", ".join(f"{p} {d.mixture[p]}" for p in POOL_ORDER if p in d.mixture) or "-"),
        (
            f"* start checkpoint of round {d.next_round}: `{d.start_checkpoint}`"
            if d.next_round is not None
            else "* no further round: the run stops here (round budget reached or arm without RL rounds)"
        ),
        f"* retained best: `{d.best_checkpoint}`; drop counter {d.drop_counter}; "
        f"KL(candidate || best) {'n/a' if d.kl is None else f'{d.kl:.4f}'}",
    ]
    if d.domain_shift is not None:
        lines.append(
            f"* domain shift: {'DETECTED — ' if d.domain_shift.detected else 'none — '}{d.domain_shift.reason}"
        )
    if d.shift_response:
        lines.append(f"* shift response: {d.shift_response}")
    if d.gate is not None:
        lines += ["", "| gate check | value | bound | held |", "|---|---|---|---|"]
        for c in d.gate.checks:
            value = "n/a" if c.value is None else f"{c.value:.4f}"
            lines.append(f"| {c.name} | {value} | {c.threshold:g} | {'yes' if c.passed else 'NO'} {c.detail} |")
    return lines + [""]


def _failure_lines(view: RoundView, round_index: int, rollout: dict[str, Any] | None) -> list[str]:
    """How runs ended, where they stalled and what their turns did wrong: each controller evaluation of the round
    (counts from the aggregates) and the round's rollouts; `bat evaluate explain` prints single runs."""
    parts = [
        (f"{label} (controller)", agg.failures)
        for label, agg in (("base policy", view.base), ("candidate", view.controller))
        if agg is not None and agg.failures is not None
    ]
    if rollout is not None:
        parts.append(("rollouts of this round", FailureSummary.model_validate(rollout)))
    if not parts:
        return []
    lines = ["## Failure breakdown", ""]
    for title, summary in parts:
        lines += [format_summary(summary, title)]
    lines += [
        f"One run turn by turn: `bat evaluate explain round_{round_index:02d}/evaluate --run RUN_ID` "
        f"(held-out transcripts) or `bat evaluate explain round_{round_index:02d}/rollout --run ROLLOUT_ID`.",
        "",
    ]
    return lines


def render_markdown(data: dict[str, Any], view: RoundView, stage_keys: tuple[str, ...]) -> str:
    lines = [f"# {data['run']} — round {data['round']:02d} ({data['arm']})", "", "## Controller evaluation", ""]
    lines += _score_lines(view, stage_keys)
    if data.get("progress"):
        lines += [
            "## Held-out controller Overall so far",
            "",
            "| policy | Overall | Task | Agentic | " + " | ".join(stage_keys) + " |",
            "|---|---|---|---|" + "---|" * len(stage_keys),
        ]
        for row in data["progress"]:
            lines.append(
                f"| {row['label']} | {row['overall']} | {row['task']} | {row['agentic']} | "
                + " | ".join(str(row["stages"].get(k, "-")) for k in stage_keys)
                + " |"
            )
        lines.append("")
    if view.final is not None:
        lines += [
            "## Final evaluation (disjoint runs; never used for routing)",
            "",
            f"Overall {pct(view.final.overall)}{_hw(view.final, 'overall')}, Task {pct(view.final.task)}, "
            f"Agentic {pct(view.final.agentic)}",
            "",
        ]
    if view.end_of_run:
        lines += [
            "## End of run: retained best on the final and untouched test splits",
            "",
            "| split | checkpoint | Overall | Task | Agentic | runs |",
            "|---|---|---|---|---|---|",
        ]
        for split, agg in view.end_of_run.items():
            lines.append(
                f"| {split} | `{agg.checkpoint}` | {pct(agg.overall)}{_hw(agg, 'overall')} | {pct(agg.task)} | "
                f"{pct(agg.agentic)} | {agg.n_runs} |"
            )
        lines.append("")
    lines += step_lines(data.get("grpo_steps") or [])
    lines += _failure_lines(view, data["round"], data.get("rollout_failures"))
    lines += ["## Decision", ""] + _decision_lines(view)
    lines += ["## Lineage and data", ""] + [f"* {k}: `{v}`" for k, v in data["lineage"].items()]
    if data["plan"]:
        lines.append(
            f"* bank version: {data['plan']['bank_version']}; leakage: "
            + ", ".join(f"{k}={v}" for k, v in data["leakage"].items() if k != "bank_version")
        )
    lines += ["", "## Phases", "", "| phase | status | finished | wall s |", "|---|---|---|---|"]
    for phase, info in data["phases"].items():
        lines.append(f"| {phase} | {info['status']} | {info.get('finished_at', '-')} | {info.get('wall_s') or '-'} |")
    lines += [
        "",
        "![Overall per policy and RL reward per step](overall.png)",
        "",
        "![Stages per round](stages.png)",
        "",
    ]
    return "\n".join(lines)


def write_round_report(layout: RunLayout, round_index: int, cfg: BatConfig) -> list[Path]:
    """Write report.md, report.json, overall.png and stages.png into `round_NN/` (returns their paths) and rebuild
    the run's TensorBoard event files (`bat.report.tensorboard`)."""
    from bat.report.tensorboard import write_tensorboard

    write_tensorboard(layout, cfg.stage_keys)
    data = report_data(layout, round_index, cfg)
    view = round_view(layout, round_index)
    out_dir = layout.round_dir(round_index)
    views = [v for v in run_views(layout) if v.round <= round_index]
    text = render_markdown(data, view, cfg.stage_keys)
    return [
        atomic_write_json(layout.report_json(round_index), data),
        atomic_write_text(layout.report_md(round_index), text),
        plot_overall(
            views,
            out_dir / "overall.png",
            f"{cfg.run.name}: held-out Overall per policy",
            grpo_curve(layout, round_index),
        ),
        plot_stages(views, cfg.stage_keys, out_dir / "stages.png"),
    ]
