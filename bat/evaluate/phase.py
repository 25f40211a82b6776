"""Phase functions: `evaluate` (controller split every round, final split per config) and `final_test`
(final + untouched test split on the retained best, once, at the end of the run).

Reads the candidate checkpoint (round 0: the SFT export; round r: the GRPO candidate, both named in the
producing phase's DONE.json) and the held-out suite; writes aggregates to `round_NN/<phase>/` and raw runs +
manifests to `heldout/round_NN/<split>/`.
"""

from __future__ import annotations

from pathlib import Path

from bat.config.load import config_hash
from bat.evaluate.episodes import SCRIPTED_PREFIX, Driver, policy_driver, scripted_driver
from bat.evaluate.runner import evaluate_split
from bat.evaluate.store import BASE_VARIANT, load_aggregate
from bat.phase.context import PhaseContext, PhaseResult
from bat.phase.events import log_event
from bat.phase.spec import Maybe, PhaseSpec
from bat.schemas.evaluation import EvalAggregate
from bat.state.atomic import atomic_write_json, read_json
from bat.state.checkpoints import read_best
from bat.state.markers import read_done


def candidate_checkpoint(ctx: PhaseContext) -> str:
    """The checkpoint this round produced, `layout.candidate_model(round)`, once its producer (`sft` in round 0,
    `grpo` after) is DONE; `scripted:<agent>` when `evaluate.agent` is a scripted agent."""
    if ctx.config.evaluate.agent != "policy":
        return SCRIPTED_PREFIX + ctx.config.evaluate.agent
    producer = "sft" if ctx.round == 0 else "grpo"
    if read_done(ctx.layout.phase_dir(ctx.round, producer)) is None:
        raise FileNotFoundError(
            f"round {ctx.round}: phase {producer!r} is not done "
            f"({ctx.layout.phase_dir(ctx.round, producer)}/DONE.json missing); nothing to evaluate"
        )
    path = ctx.layout.candidate_model(ctx.round)
    if not path.is_dir():
        raise FileNotFoundError(f"round {ctx.round}: {producer} is DONE but its candidate {path} does not exist")
    return str(path)


def _driver(ctx: PhaseContext, checkpoint: str) -> tuple[Driver, object]:
    if checkpoint.startswith(SCRIPTED_PREFIX):
        return scripted_driver(checkpoint[len(SCRIPTED_PREFIX) :]), None
    return policy_driver(ctx.config, Path(checkpoint))


def _count(result: PhaseResult, key: str, agg: EvalAggregate) -> None:
    """Record one aggregate's runs, null cells and Overall (when known) in `result.counts` under `key`."""
    result.counts[f"{key}_runs"] = agg.n_runs
    result.counts[f"{key}_null_cells"] = len(agg.null_cells)
    if agg.overall is not None:
        result.counts[f"{key}_overall"] = agg.overall


def _evaluate(
    ctx: PhaseContext,
    checkpoint: str,
    splits: list[str],
    *,
    variant: str | None = None,
    result: PhaseResult | None = None,
) -> PhaseResult:
    """Evaluate `checkpoint` on each split; counts go into `result` (prefixed with the variant, if any)."""
    driver, close = _driver(ctx, checkpoint)
    result = result if result is not None else PhaseResult(extra={"checkpoint": checkpoint})
    prefix = f"{variant}_" if variant else ""
    chash = config_hash(ctx.config)
    try:
        for split in splits:
            agg, written = evaluate_split(
                ctx.config,
                ctx.layout,
                ctx.round,
                split,
                checkpoint,
                driver,
                config_hash=chash,
                phase=ctx.phase,
                variant=variant,
            )
            result.outputs.extend(written)
            _count(result, f"{prefix}{split}", agg)
            log_event(
                ctx.layout,
                ctx.round,
                ctx.phase,
                f"{prefix}{split}: Overall {agg.overall if agg.overall is None else round(100 * agg.overall, 1)} "
                f"over {agg.n_runs} runs, {len(agg.null_cells)} null cell(s), checkpoint {checkpoint}",
            )
    finally:
        if callable(close):
            close()
    if Path(checkpoint).exists():
        result.inputs.append(Path(checkpoint))
    return result


def run_evaluate(ctx: PhaseContext) -> PhaseResult:
    """Controller split on this round's candidate; plus the final split per `evaluate.final_eval`; in round 0
    with `evaluate.base_model`, first the untrained base policy on the controller split (variant `base`)."""
    policy = ctx.config.evaluate.final_eval
    last = ctx.round >= ctx.config.run.rounds
    splits = ["controller"] + (["final"] if policy == "every_round" or (policy == "last_round" and last) else [])
    checkpoint = candidate_checkpoint(ctx)
    result = PhaseResult(extra={"checkpoint": checkpoint})
    if ctx.round == 0 and ctx.config.evaluate.base_model and not checkpoint.startswith(SCRIPTED_PREFIX):
        from bat.policy.base import base_model_dir

        base = str(base_model_dir(ctx.config.model, ctx.layout, seed=ctx.config.run.seed))
        result.extra["base_checkpoint"] = base
        done = load_aggregate(ctx.layout, ctx.round, "controller", variant=BASE_VARIANT)
        if done is not None and done.checkpoint == base:  # a resumed phase keeps the finished base evaluation
            _count(result, f"{BASE_VARIANT}_controller", done)
        else:
            _evaluate(ctx, base, ["controller"], variant=BASE_VARIANT, result=result)
    return _evaluate(ctx, checkpoint, splits, result=result)


def run_final_test(ctx: PhaseContext) -> PhaseResult:
    """Final + test split on the retained best (checkpoints/best.json), once per run; refuses a second checkpoint."""
    best = read_best(ctx.layout.best_json)
    if best is None:
        raise FileNotFoundError(f"no retained best at {ctx.layout.best_json}; run the route phase first")
    checkpoint = str(best["checkpoint"])
    marker = ctx.layout.test_split_used
    if marker.exists():
        used = read_json(marker)
        if used.get("checkpoint") != checkpoint:
            raise RuntimeError(
                f"the test split was already evaluated on {used.get('checkpoint')} (round {used.get('round')}); "
                "it is evaluated once per run, at the end"
            )
    atomic_write_json(marker, {"checkpoint": checkpoint, "round": ctx.round})
    splits = ["final"] + (["test"] if ctx.config.evaluate.test_split else [])
    return _evaluate(ctx, checkpoint, splits)


EVALUATE = PhaseSpec(
    "evaluate",
    run_evaluate,
    reads=lambda L, r: (L.candidate_model(r), L.heldout_secret, "held-out suite"),
    writes=lambda L, r: (
        L.round(r).aggregate("controller"),
        L.heldout_manifest(r, "controller"),
        Maybe(L.heldout_run_records(r, "controller"), "evaluate.keep_raw_runs is on"),
        Maybe(L.round(r).aggregate("controller", variant="base"), "round 0 with evaluate.base_model"),
        Maybe(L.round(r).aggregate("final"), "evaluate.final_eval runs the final split this round"),
    ),
    resources="evaluate",
)

FINAL_TEST = PhaseSpec(
    "final_test",
    run_final_test,
    reads=lambda L, r: (L.best_json, L.heldout_secret, "held-out final + test suites"),
    writes=lambda L, r: (
        L.round(r).aggregate("final", "final_test"),
        Maybe(L.round(r).aggregate("test", "final_test"), "evaluate.test_split is on"),
        L.heldout_manifest(r, "final"),
        Maybe(L.heldout_manifest(r, "test"), "evaluate.test_split is on"),
        Maybe(L.test_split_used, "evaluate.test_split is on"),
        L.report_md(r),
        L.report_json(r),
    ),
    resources="final_test",
    writes_report=True,
)
