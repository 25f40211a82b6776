"""Learning-rate probe of a finished one-step GRPO round, without training again.

A GRPO block starts a fresh optimizer (the optimizer reset between rounds). AdamW's first step is
`lr * g / (|g| + eps)` plus `lr * weight_decay * theta` (clipping rescales g, which the ratio cancels); SGD's
(`grpo.optimizer: sgd`) is `lr * (clipped g + weight_decay * theta)`: both linear in lr for a fixed gradient. So
the candidate that the round's step would have written at `scale * lr` is `start + scale * (candidate - start)`,
exactly up to float rounding. The probe writes those candidates, measures
each one's KL to the start policy on the bank's KL probe rows (the route's own measure) and evaluates each on the
controller split (the routing split; aggregates only) under the run's held-out secret, so every candidate meets
the same evaluation draws.

Reads the round's plan (start checkpoint), the grpo phase's DONE marker (finished), its metrics (one line per step:
the step count and lr) and candidate export (`layout.candidate_model`), the two checkpoints, the run's bank and
held-out secret. Writes under `out` only (`bat.state.lr_probe_layout.LrProbeLayout`): `ckpt/x<scale>/` (the scaled
weights), `x<scale>/` (a run dir with a copy of the secret: the controller evaluation) and `lr_probe.json` (one row
per scale). Scales already evaluated in
`out` are read back, never re-run. With `evaluate=False` (a KL screen, seconds per scale) the rows carry the KL only;
a later evaluating call evaluates those scales. `candidate` replaces the round's recorded candidate with another
one-step candidate from the same start checkpoint (e.g. `bat train grpo` on the round's rollouts under other
settings): an A/B of the step on identical rollouts and identical evaluation draws.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.phase.plan import plan_start_checkpoint
from bat.schemas.experiment import TrainingStep
from bat.schemas.lr_probe import LrProbeResults, LrProbeRow
from bat.state.atomic import atomic_write_json, read_json
from bat.state.checkpoints import EXPORT_META_NAME
from bat.state.jsonl import read_jsonl_resuming
from bat.state.layout import RunLayout
from bat.state.lr_probe_layout import LrProbeLayout
from bat.state.markers import read_done
from bat.state.model_files import export_config, export_weights

if TYPE_CHECKING:
    from bat.config.root import BatConfig


@dataclass(frozen=True)
class OneStepBlock:
    """A finished one-step GRPO round: where it started, the candidate it wrote, and the step's lr."""

    start: Path
    candidate: Path
    lr: float


def training_steps(layout: RunLayout, round_index: int, phase: str) -> list[TrainingStep]:
    """The step lines of a training phase's `metrics.jsonl` in round `round_index` (a torn final line dropped); []
    when the phase wrote none."""
    path = layout.training_metrics(round_index, phase)
    if not path.is_file():
        return []
    rows, _ = read_jsonl_resuming(path)
    return [TrainingStep.model_validate(r) for r in rows if isinstance(r, dict) and isinstance(r.get("step"), int)]


def one_step_block(layout: RunLayout, round_index: int) -> OneStepBlock:
    """The round's finished GRPO block: the plan's start checkpoint, the round's candidate export and the lr of its
    one step (the grpo phase's metrics). Raises ValueError when the round has no finished grpo phase, or its block
    ran more than one step (the probe's identity holds for one step only)."""
    grpo = layout.phase_dir(round_index, "grpo")
    if read_done(grpo) is None:
        raise ValueError(f"round {round_index} of {layout.root} has no finished grpo phase (no DONE.json)")
    steps = training_steps(layout, round_index, "grpo")
    if len(steps) != 1:
        raise ValueError(
            f"round {round_index}'s GRPO block ran {len(steps)} steps ({layout.training_metrics(round_index, 'grpo')}): "
            "the lr probe needs a one-step block (grpo.steps=1), where the step from a fresh optimizer is linear in lr"
        )
    if steps[0].lr is None:
        raise ValueError(f"{layout.training_metrics(round_index, 'grpo')}: its step records no lr; rerun the round")
    candidate = layout.candidate_model(round_index)
    if not export_config(candidate).is_file():
        raise ValueError(f"{candidate}: the round's candidate export is missing; rerun the round's grpo phase")
    return OneStepBlock(plan_start_checkpoint(layout, round_index), candidate, steps[0].lr)


def write_scaled(start: Path, candidate: Path, scale: float, out: Path, dtype: str = "float32") -> Path:
    """Write `start + scale * (candidate - start)` (every parameter, computed in float64, stored in `dtype`) as an
    HF export at `out` with the candidate's tokenizer and chat template; returns `out`. An existing complete export
    is kept."""
    import torch

    from bat.policy.loader import load_model

    if export_weights(out).exists():
        return out
    base = dict(load_model(start, dtype=dtype).named_parameters())
    model = load_model(candidate, dtype=dtype)
    moved = dict(model.named_parameters())
    if base.keys() != moved.keys() or any(base[k].shape != moved[k].shape for k in base):
        raise ValueError(f"{start} and {candidate} are different architectures: not one GRPO step apart")
    with torch.no_grad():
        for key, param in moved.items():
            theta = base[key].to(torch.float64)
            param.copy_((theta + scale * (param.to(torch.float64) - theta)).to(param.dtype))
    meta = read_json(candidate / EXPORT_META_NAME) if (candidate / EXPORT_META_NAME).exists() else {}
    meta |= {"kind": "lr-probe", "start": str(start), "candidate": str(candidate), "scale": scale}
    return write_export(model, candidate, out, meta)


def write_export(model: Any, files_from: Path, out: Path, meta: dict[str, Any]) -> Path:
    """Save `model` as an HF export at `out` (written beside it, then renamed: complete or absent) with the other
    files of the export `files_from` (tokenizer, chat template) and `meta` as its export record; returns `out`."""
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    for item in Path(files_from).iterdir():
        if item.is_file() and not (tmp / item.name).exists() and item.name != EXPORT_META_NAME:
            shutil.copy2(item, tmp / item.name)
    atomic_write_json(tmp / EXPORT_META_NAME, meta)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp.rename(out)
    return out


def probe_round(
    cfg: BatConfig,
    layout: RunLayout,
    round_index: int,
    scales: Sequence[float],
    out: Path,
    *,
    evaluate: bool = True,
    candidate: Path | None = None,
) -> list[LrProbeRow]:
    """For each scale: the scaled candidate (scale 0 = the start checkpoint, 1 = the recorded candidate), its KL to
    the start policy and (with `evaluate`) its controller evaluation. Returns (and writes to `out/lr_probe.json`) one
    row per scale (`LrProbeRow`; the evaluation's fields None / empty / 0 when not evaluated)."""
    from bat.curriculum.kl import probe_prompts

    block = one_step_block(layout, round_index)
    if candidate is not None:
        if not export_config(candidate).is_file():
            raise ValueError(
                f"--candidate {candidate} is not an HF export (no config.json): pass the export folder a one-step "
                f"GRPO run from {block.start} wrote (`bat train grpo ... --out DIR` writes DIR/export)"
            )
        block = OneStepBlock(block.start, candidate, block.lr)
    if not layout.heldout_secret.exists():
        raise ValueError(
            f"{layout.heldout_secret} is missing: the probe evaluates on the run's own held-out suite, and a run "
            "that finished a GRPO round has one (was the run's heldout/ folder moved?)"
        )
    prompts = probe_prompts(layout, cfg)
    files = LrProbeLayout(out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[LrProbeRow] = []
    for scale in scales:
        recorded = _read_row(files, scale)
        if recorded is not None and (recorded.evaluated or not evaluate):
            rows.append(recorded)
            continue
        rows.append(_probe_scale(cfg, layout, round_index, block, scale, files, prompts, evaluate))
    results = LrProbeResults(round=round_index, run=str(layout.root), lr=block.lr, rows=rows)
    atomic_write_json(files.results, results.model_dump(mode="json"))
    return rows


def _probe_scale(
    cfg: BatConfig,
    layout: RunLayout,
    round_index: int,
    block: OneStepBlock,
    scale: float,
    files: LrProbeLayout,
    prompts: list,
    evaluate: bool,
) -> LrProbeRow:
    """One scale's row: its checkpoint (written for scales other than 0 and 1), its KL to the start on `prompts`
    (None without probe rows) and, with `evaluate`, its controller evaluation under the run's held-out secret;
    written to the scale's run dir (`lr_probe_row.json`)."""
    from bat.benchmark.secret import install_secret

    started = time.monotonic()
    checkpoint = _scale_checkpoint(cfg, block, scale, files)
    row = LrProbeRow(
        scale=scale,
        lr=scale * block.lr,
        checkpoint=str(checkpoint),
        kl_to_start=_kl_to_start(cfg, round_index, block, scale, checkpoint, prompts) if prompts else None,
        evaluated=evaluate,
    )
    probe_layout = RunLayout(files.scale_run(scale)).ensure()
    if evaluate:
        install_secret(layout.heldout_secret, probe_layout.heldout_secret)
        agg = _evaluate(cfg, probe_layout, round_index, checkpoint)
        row.overall, row.task, row.agentic, row.stages = agg.overall, agg.task, agg.agentic, dict(agg.stages)
        row.n_runs = agg.n_runs
    row.seconds = round(time.monotonic() - started, 1)
    atomic_write_json(files.row(scale), row.model_dump(mode="json"))
    return row


def _scale_checkpoint(cfg: BatConfig, block: OneStepBlock, scale: float, files: LrProbeLayout) -> Path:
    """The checkpoint at `start + scale x step`: the start for 0, the candidate for 1, else a written export."""
    if scale == 0:
        return block.start
    if scale == 1:
        return block.candidate
    return write_scaled(block.start, block.candidate, scale, files.scaled_checkpoint(scale), dtype=cfg.model.dtype)


def _kl_to_start(
    cfg: BatConfig, round_index: int, block: OneStepBlock, scale: float, checkpoint: Path, prompts: list
) -> float:
    """KL of `checkpoint` to the start policy on the KL probe `prompts` (the route's measure); 0 at scale 0."""
    from bat.seeds import derive_seed
    from bat.train.kl_estimate import estimate_kl

    if scale == 0:
        return 0.0
    return float(
        estimate_kl(
            checkpoint,
            block.start,
            prompts,
            max_new_tokens=cfg.curriculum.fallback.kl_new_tokens,
            seed=derive_seed(cfg.run.seed, round_index, "lr_probe_kl"),
            dtype=cfg.model.dtype,
        )
    )


def _read_row(files: LrProbeLayout, scale: float) -> LrProbeRow | None:
    """The row a previous call wrote for `scale`, None when there is none."""
    path = files.row(scale)
    return LrProbeRow.model_validate(read_json(path)) if path.exists() else None


def _evaluate(cfg: BatConfig, layout: RunLayout, round_index: int, checkpoint: Path):
    """The controller evaluation of `checkpoint` filed under `layout`'s round `round_index` (resumes a partial one)."""
    from bat.config import config_hash
    from bat.evaluate.episodes import policy_driver
    from bat.evaluate.runner import evaluate_split

    driver, close = policy_driver(cfg, checkpoint)
    try:
        agg, _written = evaluate_split(
            cfg, layout, round_index, "controller", str(checkpoint), driver, config_hash=config_hash(cfg)
        )
    finally:
        close()
    return agg
