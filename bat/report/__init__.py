"""Round reports: `round_NN/report.md` + `report.json` and matplotlib PNG plots beside them.

Public API; event lines go through `bat.phase.events.log_event`:

* `bat.report.round_report.write_round_report(layout, round, cfg) -> [report.json, report.md, overall.png,
  stages.png]` — stage table and Overall/Task/Agentic with half-widths and deltas vs the retained best, per-track
  table, null cells, final split (never used for routing), decision and reason with every gate check, mixture,
  bank version + leakage summary, checkpoint lineage, per-phase status and seconds. Called by the route phase.
* `bat.report.plots.plot_overall(views, path, title, curve)` (left: raw Overall per policy, base, SFT and each RL
  round, dashed with half-widths, best-so-far staircase, stars where a new best was retained — paper Fig. 1c;
  right: the RL training reward per GRPO step by pool, `curve` from `bat.report.rl_steps.grpo_curve(layout)`) and
  `plot_stages(views, stage_keys, path)`.
* `bat.report.rl_steps.step_lines(rows)` — the report's "RL steps" table from one round's GRPO `metrics.jsonl`.
* `bat.report.summary.run_summary(layout) -> list[dict]` — one row per round (overall, task, agentic, best,
  action, target, nulls; 0-100 strings) for `bat status`; `run_views(layout)` / `round_view(layout, r)`.
* CLI: `bat report [--state DIR] [--round N]` re-renders reports and prints the run table.
"""
