"""Phase function of the `base` arm: the untrained base model on the end-of-run splits (final, + test if enabled).

Reads the base model (`model.path`, or `models/tiny` copied from the shared bootstrap) and the held-out suite;
writes `round_00/final_test/aggregate_<split>.json` and the raw runs under `heldout/round_00/<split>/`, exactly as
the `final_test` phase does for trained arms (same splits, same suite, same budgets).
"""

from __future__ import annotations

from bat.phase.context import PhaseContext, PhaseResult


def end_splits(ctx: PhaseContext) -> list[str]:
    """The end-of-run splits: final, plus test when `evaluate.test_split`."""
    return ["final"] + (["test"] if ctx.config.evaluate.test_split else [])


def final_test_base(ctx: PhaseContext) -> PhaseResult:
    """Evaluate the untrained base model on the end-of-run splits (phase name `final_test`, round 0)."""
    from bat.config.load import config_hash
    from bat.evaluate.episodes import policy_driver
    from bat.evaluate.runner import evaluate_split
    from bat.train.phase import base_model_path

    base = base_model_path(ctx)
    driver, close = policy_driver(ctx.config, base)
    result = PhaseResult(inputs=[base], extra={"checkpoint": str(base), "arm": "base"})
    try:
        for split in end_splits(ctx):
            agg, written = evaluate_split(
                ctx.config,
                ctx.layout,
                ctx.round,
                split,
                str(base),
                driver,
                config_hash=config_hash(ctx.config),
                phase=ctx.phase,
            )
            result.outputs.extend(written)
            result.counts[f"{split}_runs"] = agg.n_runs
            result.counts[f"{split}_null_cells"] = len(agg.null_cells)
            if agg.overall is not None:
                result.counts[f"{split}_overall"] = agg.overall
    finally:
        close()
    return result
