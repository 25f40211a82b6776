"""The wide final evaluation: an arm x seed's end-of-run checkpoint on a final split with more runs per track.

An experiment's end-of-run evaluation scores each arm x seed on `benchmark.split_repeats.final` runs per track; a
run's Overall is nearly binary, so a gap between two trained arms smaller than ~25 points hides in that noise
(`bat.experiment.power`). The wide evaluation re-scores the same retained checkpoint (the one the end-of-run
evaluation named in its manifest, digest-checked) on `repeats` runs per track of the same final split. Held-out run
`r` of a track is keyed by (split, track, r) alone, so the first end-of-run repeats are the same instances with the
same sampling seeds: their recorded scores are reused (or those of an earlier, narrower wide evaluation) and only
the new runs are played.

Reads an arm x seed's `experiment_arm.json` (status, `final_round`), its end-of-run final manifest and raw runs
(`heldout/round_NN/final/`) and the experiment's held-out secret. Writes, under the arm x seed's state dir, the wide
evaluation's held-out files (`heldout/round_NN/wide_rNN/final/`) and aggregate
(`round_NN/final_test/aggregate_final_wide_rNN.json`), resuming from its partial runs; and the committed record
`<out_dir>/wide/<arm>/seed_<s>_r<NN>.json` (per-run scores, never overwritten), from which the experiment report's
"Wide final evaluation" section is built on any disk. The final split never feeds routing or tuning.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import submitit

from bat.experiment.records import read_record, read_records, write_record
from bat.experiment.spec import ExperimentSpec, arm_config
from bat.schemas.experiment import ArmRecord, WideRecord, WideRun
from bat.state.experiment_layout import ExperimentRunFiles, ResultsLayout, wide_variant

WIDE_PHASE = "final_test"
"""The end-of-run phase folder the wide aggregate is filed under (as a variant of its final aggregate)."""


class WideError(ValueError):
    """An arm x seed that cannot be widened as asked; the message names the file and what to do."""


def wide_config(spec: ExperimentSpec, arm: str, seed: int, repeats: int) -> Any:
    """The arm x seed's config with `repeats` runs per track on the final split (nothing else changes)."""
    cfg = arm_config(spec, arm, seed)
    bench = cfg.benchmark.model_copy(update={"split_repeats": {**cfg.benchmark.split_repeats, "final": repeats}})
    return cfg.model_copy(update={"benchmark": bench})


def _finished_arm(spec: ExperimentSpec, arm: str, seed: int) -> tuple[Path, int]:
    """(state dir, final round) of a finished arm x seed; WideError otherwise."""
    from bat.experiment.share import arm_dir

    root = arm_dir(spec, seed, arm)
    path = ExperimentRunFiles(root).arm_record
    record = read_record(path, ArmRecord)
    if record is None or record.status != "done" or record.final_round is None:
        status = record.status if record is not None else "not run on this disk"
        raise WideError(
            f"{path}: arm {arm} seed {seed} is {status}; the wide evaluation needs its finished state dir (run the "
            f"arm x seed on this disk first: its retained checkpoint is not committed)"
        )
    return root, record.final_round


def _seed_partial(layout: Any, final_round: int, repeats: int, end_repeats: int) -> int:
    """Copy the runs (and transcripts) of the widest evaluation of this checkpoint already on disk with fewer than
    `repeats` runs per track (an earlier wide one, else the end-of-run one) into the wide evaluation's partial files
    once; returns how many runs were copied (0 when a partial exists already: an interrupted wide evaluation
    resumes from it)."""
    from bat.evaluate.store import partial_runs_path, partial_transcripts_path, read_heldout_runs
    from bat.schemas.breakdown import Transcript
    from bat.state.jsonl import append_jsonl, read_jsonl

    variant = wide_variant(repeats)
    partial = partial_runs_path(layout, final_round, "final", variant)
    if partial.exists():
        return 0
    narrower = [wide_variant(n) for n in range(repeats - 1, end_repeats, -1)]
    source = next((v for v in narrower if layout.heldout_run_records(final_round, "final", v).exists()), None)
    runs = read_heldout_runs(layout, final_round, "final", source)
    transcripts_path = layout.heldout_transcripts(final_round, "final", source)
    if transcripts_path.exists():
        ids = {r.run_id for r in runs}
        kept = [t for t in read_jsonl(transcripts_path, Transcript) if t.run_id in ids]
        append_jsonl(partial_transcripts_path(layout, final_round, "final", variant), kept)
    append_jsonl(partial, runs)
    return len(runs)


def evaluate_wide(
    spec: ExperimentSpec, arm: str, seed: int, repeats: int, known: dict[str, list[WideRecord]] | None = None
) -> WideRecord:
    """Evaluate (or resume) the arm x seed's retained checkpoint on `repeats` final runs per track; returns the
    record to commit. An evaluation already finished is read back, not redone.

    `known`: checkpoint digest -> wide records of the same experiment and `repeats`. The evaluation is
    deterministic (the same checkpoint with the same sampling seeds plays the same runs: the `sft` arm's seeds,
    which share one checkpoint, scored identically run by run), so an arm x seed whose retained checkpoint has a
    record there on the same held-out suite (its end-of-run runs face the record's instances) takes its runs
    (`reused_from`) instead of playing them again; a record of another suite (another disk's secret) is not a twin."""
    from bat.benchmark.secret import read_secret
    from bat.evaluate.store import load_aggregate, read_heldout_runs
    from bat.state.layout import RunLayout

    root, final_round = _finished_arm(spec, arm, seed)
    layout = RunLayout(root)
    manifest, end_repeats = _end_of_run(layout, final_round, repeats)
    started, reused = time.monotonic(), 0
    finished = load_aggregate(layout, final_round, "final", WIDE_PHASE, wide_variant(repeats)) is not None
    # the suite's public name (the key stays in the state dir); runs pair only within one suite
    suite = read_secret(layout.heldout_secret).fingerprint if layout.heldout_secret.exists() else None
    end_runs = read_heldout_runs(layout, final_round, "final") if not finished else []
    twin = next((r for r in (known or {}).get(manifest.checkpoint_digest, []) if _same_suite(r, end_runs)), None)
    if twin is not None:
        return _from_twin(twin, arm, seed, end_repeats, final_round, end_runs).model_copy(
            update={"heldout_suite": suite}
        )
    if not finished:
        _check_retained(layout, final_round, manifest.checkpoint, manifest.checkpoint_digest)
        reused = _seed_partial(layout, final_round, repeats, end_repeats)
    cfg = wide_config(spec, arm, seed, repeats)
    agg, runs = score_wide(cfg, layout, final_round, manifest.checkpoint, repeats)
    extra = {"end_of_run_repeats": end_repeats, "final_round": final_round, "reused_runs": reused}
    return scored_record(arm, seed, repeats, (manifest.checkpoint_digest, suite), agg, runs, started, **extra)


def _end_of_run(layout: Any, final_round: int, repeats: int) -> tuple[Any, int]:
    """(manifest, runs per track) of the arm x seed's end-of-run final evaluation; WideError when it has none or
    already has `repeats` runs per track or more."""
    from bat.evaluate.store import heldout_manifest_path
    from bat.schemas.evaluation import EvalManifest
    from bat.state.atomic import read_json

    path = heldout_manifest_path(layout, final_round, "final")
    if not path.exists():
        raise WideError(f"{path}: not found; the arm x seed has no end-of-run final evaluation")
    manifest = EvalManifest.model_validate(read_json(path))
    end_repeats = max((r.repeat for r in manifest.runs), default=-1) + 1
    if repeats <= end_repeats:
        raise WideError(
            f"{path}: the end-of-run evaluation already has {end_repeats} runs per track; ask for more than "
            f"{end_repeats}"
        )
    return manifest, end_repeats


def _check_retained(layout: Any, final_round: int, checkpoint: str, digest: str) -> None:
    """WideError unless the retained `checkpoint` the end-of-run evaluation named is on disk with its `digest`."""
    from bat.evaluate.manifest import checkpoint_digest
    from bat.evaluate.store import heldout_manifest_path

    manifest_path = heldout_manifest_path(layout, final_round, "final")
    if not Path(checkpoint).is_dir():
        raise WideError(
            f"{manifest_path}: its retained checkpoint {checkpoint} is gone; the wide evaluation scores that "
            "checkpoint, so it runs on the disk that trained it"
        )
    if checkpoint_digest(checkpoint) != digest:
        raise WideError(
            f"{checkpoint}: its digest no longer matches the end-of-run evaluation's ({manifest_path}); the retained "
            "checkpoint changed, so its runs cannot be extended"
        )


def score_wide(
    cfg: Any, layout: Any, round_index: int, checkpoint: str, repeats: int
) -> tuple[Any, dict[str, WideRun]]:
    """`checkpoint`'s wide final evaluation (`repeats` runs per track) filed under `layout`'s round `round_index`:
    played (or resumed) unless finished already; returns its aggregate and run entries."""
    from bat.evaluate.store import load_aggregate, read_heldout_runs

    variant = wide_variant(repeats)
    if load_aggregate(layout, round_index, "final", WIDE_PHASE, variant) is None:
        play_final(cfg, layout, round_index, checkpoint, variant)
    agg = load_aggregate(layout, round_index, "final", WIDE_PHASE, variant)
    assert agg is not None
    return agg, run_entries(read_heldout_runs(layout, round_index, "final", variant))


def scored_record(
    arm: str,
    seed: int,
    repeats: int,
    checkpoint: tuple[str, str | None],
    agg: Any,
    runs: dict[str, WideRun],
    started: float,
    **extra: Any,
) -> WideRecord:
    """The wide record of a checkpoint (`checkpoint`: its digest and the held-out suite it met) scored to `agg`
    with `runs`, its wall from `started` (`time.monotonic`); `extra`: the record's optional fields."""
    digest, suite = checkpoint
    return WideRecord(
        arm=arm,
        seed=seed,
        repeats=repeats,
        checkpoint_digest=digest,
        heldout_suite=suite,
        overall=agg.overall,
        n_runs=agg.n_runs,
        wall_s=round(time.monotonic() - started, 3),
        runs=runs,
        **extra,
    )


def play_final(cfg: Any, layout: Any, round_index: int, checkpoint: str, variant: str | None) -> None:
    """Play (or resume) `checkpoint`'s runs of the final split under `cfg` into `layout`'s `variant` files (None:
    the round's own final-split files), as one job of the end-of-run evaluation's kind (`orchestrate.executor`,
    `orchestrate.resources.final_test`): on a cluster the policy runs on a compute node, not in the `bat experiment`
    process. Raises WideError naming the job's log when it fails (its partial runs are kept: a rerun resumes)."""
    from bat.config.load import resolved_dict
    from bat.orchestrate.jobwait import PhaseFailed, run_callable

    job = FinalPlayJob(resolved_dict(cfg), str(layout.root), round_index, checkpoint, variant)
    try:
        run_callable(cfg, layout, round_index, WIDE_PHASE, job, f"bat experiment: wide final {variant}")
    except PhaseFailed as exc:
        raise WideError(str(exc)) from None


class FinalPlayJob(submitit.helpers.Checkpointable):
    """The callable `play_final` submits: plain-data arguments (pickled by submitit); a requeued job resumes from
    the evaluation's partial runs.

    The weights' folder is `weights`: on time-out (USR2) submitit calls the callable's `checkpoint` method to requeue
    the job, so no attribute may take that name."""

    def __init__(
        self, config_data: dict[str, Any], state_root: str, round_index: int, weights: str, variant: str | None
    ):
        self.config_data, self.state_root = config_data, state_root
        self.round_index, self.weights, self.variant = round_index, weights, variant

    def __call__(self) -> int:
        """Play the runs still missing; returns how many runs the variant holds."""
        from bat.config.load import config_hash, parse_config
        from bat.evaluate.episodes import policy_driver
        from bat.evaluate.runner import evaluate_split
        from bat.state.layout import RunLayout

        cfg, layout = parse_config(self.config_data, "<wide job config>"), RunLayout(Path(self.state_root))
        driver, close = policy_driver(cfg, Path(self.weights))
        try:
            agg, _written = evaluate_split(
                cfg,
                layout,
                self.round_index,
                "final",
                self.weights,
                driver,
                config_hash=config_hash(cfg),
                phase=WIDE_PHASE,
                variant=self.variant,
            )
        finally:
            close()
        return agg.n_runs


def run_entries(runs: list[Any]) -> dict[str, WideRun]:
    """A wide record's `runs`: run id -> instance, track and scores, from held-out run records (`EvalRun`)."""
    return {
        r.run_id: WideRun(instance_id=r.instance_id, track=r.track, overall=r.overall, task=r.task, agentic=r.agentic)
        for r in sorted(runs, key=lambda r: r.run_id)
    }


def _same_suite(record: WideRecord, end_runs: list[Any]) -> bool:
    """True when the wide `record` holds every one of `end_runs` (an arm x seed's end-of-run runs) with the same
    instance: both were evaluated on one held-out suite."""
    return bool(end_runs) and all(
        r.run_id in record.runs and record.runs[r.run_id].instance_id == r.instance_id for r in end_runs
    )


def _from_twin(
    twin: WideRecord, arm: str, seed: int, end_repeats: int, final_round: int, end_runs: list[Any]
) -> WideRecord:
    """The record of an arm x seed whose retained checkpoint `twin` (another arm x seed's record, same suite) already
    scored; WideError when the twin scored this arm x seed's end-of-run runs otherwise (not the same experiment)."""
    twin_runs = twin.run_scores()
    mismatched = [r.run_id for r in end_runs if twin_runs.get(r.run_id) != (r.instance_id, r.overall)]
    if mismatched:
        raise WideError(
            f"arm {twin.arm} seed {twin.seed}'s wide record has this checkpoint's digest but not its end-of-run "
            f"runs (first: {mismatched[0]}); move that record aside and evaluate both afresh"
        )
    return WideRecord(
        repeats=twin.repeats,
        checkpoint_digest=twin.checkpoint_digest,
        overall=twin.overall,
        n_runs=twin.n_runs,
        runs=twin.runs,
        arm=arm,
        seed=seed,
        end_of_run_repeats=end_repeats,
        final_round=final_round,
        reused_runs=twin.n_runs,
        reused_from=f"{twin.arm} seed {twin.seed}",
        wall_s=0.0,
    )


def write_wide_piece(out_dir: Path, record: WideRecord) -> Path | None:
    """Commit-ready record of one wide evaluation, written once (None when it exists already)."""
    from bat.experiment.pieces import stamp_piece

    path = ResultsLayout(out_dir).wide_piece(record.arm, record.seed, record.repeats)
    if path.exists():
        return None
    return write_record(path, stamp_piece(record))


def read_wide_pieces(out_dir: Path) -> list[WideRecord]:
    """Every committed wide-evaluation record under `<out_dir>/wide/`, sorted by (repeats, arm, seed)."""
    records = read_records(ResultsLayout(out_dir).wide_pieces(), WideRecord)
    return sorted(records, key=lambda r: (r.repeats, r.arm, r.seed))


def read_anchor_pieces(out_dir: Path) -> list[WideRecord]:
    """Every committed suite anchor under `<out_dir>/wide/_anchor/`, sorted by (repeats, suite)."""
    records = read_records(ResultsLayout(out_dir).anchor_pieces(), WideRecord)
    return sorted(records, key=lambda r: (r.repeats, r.heldout_suite or ""))


def run_wide(
    spec: ExperimentSpec, arms: list[str], seeds: list[int], repeats: int, out_dir: Path
) -> tuple[list[str], list[str]]:
    """Widen every selected arm x seed that has no committed record yet; returns (one line per arm x seed widened
    or committed already, one line per arm x seed skipped and why). One that cannot be widened does not stop the
    others."""
    lines, skipped = [], []
    known: dict[str, list[WideRecord]] = {}
    for record in read_wide_pieces(out_dir):
        if record.repeats == repeats:
            known.setdefault(record.checkpoint_digest, []).append(record)
    for arm in arms:
        for seed in seeds:
            committed = ResultsLayout(out_dir).wide_piece(arm, seed, repeats)
            if committed.exists():
                lines.append(f"{arm} seed {seed}: committed already ({committed})")
                continue
            print(f"bat experiment: wide final evaluation, arm {arm} seed {seed}, {repeats} runs per track", flush=True)
            try:
                record = evaluate_wide(spec, arm, seed, repeats, known)
            except WideError as exc:
                skipped.append(f"{arm} seed {seed}: skipped: {exc}")
                continue
            path = write_wide_piece(out_dir, record)
            known.setdefault(record.checkpoint_digest, []).append(record)
            source = f"reused from {record.reused_from}" if record.reused_from else "reused"
            lines.append(
                f"{arm} seed {seed}: Overall {100 * (record.overall or 0):.1f} over {record.n_runs} runs "
                f"({record.reused_runs} {source}) -> {path} (commit it)"
            )
    return lines, skipped


def print_wide(lines: list[str], skipped: list[str]) -> None:
    """Print `run_wide`'s outcome: one line per arm x seed widened or recorded already, one warning per skip."""
    for line in lines:
        print(f"bat experiment: wide final: {line}", flush=True)
    for line in skipped:
        print(f"bat experiment: WARNING: wide final: {line}", flush=True)
