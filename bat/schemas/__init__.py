"""Record types that cross phases, each with a `schema_version`; validated on write and read.

Modules: `bank` (BankRow, SftRow, trajectories), `rollout` (RolloutRecord, RewardRecord),
`evaluation` (EvalAggregate and per-run records), `routing` (RouteDecision, RoundPlan), `experiment` and
`experiment_results` (the arm experiment's records and collected results; committed pieces carry `piece_schema`),
`lr_probe` (the lr probe's rows).
"""
