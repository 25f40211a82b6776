"""Round reports: `round_NN/report.md` + `report.json`, `events.log` lines, matplotlib PNG plots.

Public API (team "evaluate/curriculum"):

* `bat.report.events.log_event(layout, round, phase, message, **fields)` — one line appended to both
  `state/<run>/events.log` and `round_NN/events.log` (`tail -f` friendly).
* `bat.report.round_report.write_round_report(layout, round, cfg) -> (md_path, json_path)` — stage table,
  Overall/Task/Agentic with half-widths, decision and reason, mixture, bank version + leakage summary,
  checkpoint lineage, wall time per phase.
* `bat.report.plots.plot_rounds(layout, out_dir) -> list[Path]` — `overall.png` (raw per-round curve, best-so-far
  staircase, stars on promoted rounds) and `stages.png` (per-stage bars per round).
* `bat.report.summary.run_summary(layout) -> list[dict]` — one row per round for `bat status`.
"""
