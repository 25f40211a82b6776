"""The null control: how far a checkpoint's wide final score moves from the SFT's for a change that learned nothing.

A held-out run's Overall is nearly binary, and any change to the weights changes which tokens a run samples at its
fixed sampling seed, so an arm's retained checkpoint meets the SFT's instances on fresh draws. The null control
moves the shared SFT checkpoint along a seeded random direction (every parameter tensor W gets `scale * rms(W) * z`,
z ~ N(0, 1) drawn from (null seed, tensor name)), scaled so that its KL from the SFT on the route's KL probe prompts
(`bat.curriculum.kl`, the measure the Eq. 6 fallback reads) is `target_kl`, about as far as an RL round moves it,
and scores it on the same wide final runs as the arms. Its gain over the SFT, paired run by run, is what a change
of that size yields without learning; an arm's gain is evidence of learning only beyond it.

Reads the shared bootstrap (SFT export, bank probe rows, held-out secret). Writes, per null seed, a run state dir
`<experiment>/_null-kl<KL>/seed_<k>/` (each scale tried under `checkpoints/null/scale_<s>/`, the chosen one kept;
`checkpoints/null/null.json` with its calibration; the evaluation's held-out files) and the committed record
`<out_dir>/wide/_null-kl<KL>/seed_<k>_r<NN>.json` (never overwritten), which the report's wide section lists as the
arm `_null-kl<KL>` beside the arms (one such arm per KL asked for). The final split never feeds routing or tuning; the control trains nothing.
"""

from __future__ import annotations

import math
import shutil
import time
from pathlib import Path

from bat.experiment.records import read_record, write_record
from bat.experiment.spec import ExperimentSpec
from bat.schemas.experiment import NullCalibration, NullInfo, ScaleTry
from bat.state.experiment_layout import ExperimentRunFiles, ExperimentStateLayout, ResultsLayout, null_arm
from bat.state.model_files import export_weights

FIRST_SCALE = 0.01
"""The first relative scale tried (noise of 1% of each tensor's RMS)."""
KL_TOLERANCE = 0.25
"""A calibrated scale is accepted when its KL is within this fraction of the target."""
MAX_TRIES = 6


class NullControlError(ValueError):
    """A null control that cannot run as asked; the message names the file or value and what to do."""


def write_perturbed(start: Path, out: Path, scale: float, seed: int, dtype: str = "float32") -> Path:
    """Write `start` moved by `scale * rms(W) * z` per parameter tensor W (z ~ N(0, 1) from (seed, tensor name);
    computed in float64, stored in `dtype`) as an HF export at `out` with the start's tokenizer and chat template;
    returns `out`. An existing complete export is kept."""
    import torch

    from bat.curriculum.lr_probe import write_export
    from bat.policy.loader import load_model
    from bat.seeds import derive_seed

    if export_weights(out).exists():
        return out
    model = load_model(start, dtype=dtype)
    with torch.no_grad():
        for name, param in sorted(model.named_parameters()):
            theta = param.to(torch.float64)
            rms = theta.pow(2).mean().sqrt()
            gen = torch.Generator().manual_seed(derive_seed(seed, "null", name) % (2**63))
            z = torch.randn(theta.shape, generator=gen, dtype=torch.float64)
            param.copy_((theta + scale * rms * z).to(param.dtype))
    meta = {"kind": "null-control", "start": str(start), "scale": scale, "seed": seed}
    return write_export(model, Path(start), out, meta)


def next_scale(tried: list[ScaleTry], target_kl: float) -> float:
    """The next relative scale to try from the (scale, kl) pairs measured so far: KL grows as scale^2 for a small
    step, so the last measured pair is rescaled by sqrt(target / kl) (x10 when it measured no KL at all)."""
    if not tried:
        return FIRST_SCALE
    last = tried[-1]
    if last.kl <= 0:
        return last.scale * 10
    return last.scale * math.sqrt(target_kl / last.kl)


def calibrate(
    start: Path, files: ExperimentRunFiles, prompts: list[list[dict]], target_kl: float, seed: int, kl_args: dict
) -> NullCalibration:
    """Find a scale whose perturbed export (`files.null_scale(s)`) is `target_kl` (+- KL_TOLERANCE) from `start`;
    returns the calibration (scale, kl, checkpoint, every try), read back from `files.null_calibration` when done
    already. The KL is `bat.train.kl_estimate.estimate_kl(candidate, start, prompts, **kl_args)`. Raises
    NullControlError after MAX_TRIES scales."""
    from bat.train.kl_estimate import estimate_kl

    record_path = files.null_calibration
    record = read_record(record_path, NullCalibration) or NullCalibration(target_kl=target_kl, tried=[])
    if record.target_kl != target_kl:
        raise NullControlError(
            f"{record_path}: this null seed was calibrated to KL {record.target_kl}, not {target_kl}; ask for "
            f"--null-kl {record.target_kl}, or use another null seed"
        )
    if record.checkpoint:
        return record
    while len(record.tried) < MAX_TRIES:
        scale = next_scale(record.tried, target_kl)
        candidate = files.null_scale(scale)
        write_perturbed(start, candidate, scale, seed, kl_args.get("dtype", "float32"))
        kl = float(estimate_kl(candidate, start, prompts, **kl_args))
        record.tried.append(ScaleTry(scale=scale, kl=kl))
        write_record(record_path, record)
        print(f"bat experiment: null control seed {seed}: scale {scale:.4g} -> KL {kl:.4f}", flush=True)
        if abs(kl - target_kl) <= KL_TOLERANCE * target_kl:
            record.scale, record.kl, record.checkpoint = scale, kl, str(candidate)
            write_record(record_path, record)
            return record
        shutil.rmtree(candidate)
    tried = [t.model_dump() for t in record.tried]
    raise NullControlError(
        f"{record_path}: no scale within {KL_TOLERANCE:.0%} of KL {target_kl} after {MAX_TRIES} tries ({tried}); "
        "delete the file to start over, or ask for another --null-kl"
    )


def null_state_dir(spec: ExperimentSpec, target_kl: float, null_seed: int) -> Path:
    """`<experiment state>/_null-kl<KL>/seed_<k>`: the run state dir of one null seed at one KL."""
    return ExperimentStateLayout(spec.root).null_dir(target_kl, null_seed)


def run_null_control(spec: ExperimentSpec, null_seed: int, target_kl: float, repeats: int, out_dir: Path) -> str:
    """Calibrate, write and score the null checkpoint of `null_seed` on `repeats` final runs per track of this
    disk's suite (the arms' wide evaluation), and commit its record; returns the line to print. A null seed with a
    committed record is not run again."""
    from bat.benchmark.secret import read_secret
    from bat.curriculum.kl import probe_prompts
    from bat.evaluate.manifest import checkpoint_digest
    from bat.experiment.pieces import stamp_piece
    from bat.experiment.share import run_shared, seed_arm_state
    from bat.experiment.wide import score_wide, scored_record, wide_config

    if target_kl <= 0:
        raise NullControlError(f"--null-kl must be > 0, got {target_kl}")
    arm = null_arm(target_kl)
    path = ResultsLayout(out_dir).wide_piece(arm, null_seed, repeats)
    if path.exists():
        return f"{arm} seed {null_seed}: committed already ({path})"
    shared = run_shared(spec, spec.seeds[0])
    layout = seed_arm_state(shared, null_state_dir(spec, target_kl, null_seed), models_only=True)
    trained = [a.name for a in spec.arms if a.kind == "trained"]
    if not trained:
        raise NullControlError("the experiment has no trained arm: the null control is scored as its arms are")
    # the arms differ in training, not in evaluation: any trained arm's wide config scores the null checkpoint
    cfg = wide_config(spec, spec.reference_arm or trained[0], spec.seeds[0], repeats)
    fallback = cfg.curriculum.fallback
    kl_args = {"max_new_tokens": fallback.kl_new_tokens, "seed": null_seed, "dtype": cfg.model.dtype}
    prompts = probe_prompts(shared.layout, cfg)
    if not prompts:
        raise NullControlError(
            f"{shared.layout.root}: its bank holds no KL probe rows (curriculum.fallback.kl_enabled is off, or the "
            "bank is too small): the null control measures its distance from the SFT on them"
        )
    started = time.monotonic()
    calibration = calibrate(
        Path(shared.sft_checkpoint), ExperimentRunFiles(layout.root), prompts, target_kl, null_seed, kl_args
    )
    assert calibration.checkpoint is not None and calibration.scale is not None and calibration.kl is not None
    agg, runs = score_wide(cfg, layout, 0, calibration.checkpoint, repeats)
    suite = read_secret(layout.heldout_secret).fingerprint
    null = NullInfo(
        start_digest=shared.sft_digest,
        direction="per tensor W: scale * rms(W) * z, z ~ N(0, 1) seeded by (null seed, tensor name)",
        target_kl=target_kl,
        scale=calibration.scale,
        kl=calibration.kl,
        tried=calibration.tried,
    )
    digest = checkpoint_digest(calibration.checkpoint)
    record = scored_record(arm, null_seed, repeats, (digest, suite), agg, runs, started, null=null)
    write_record(path, stamp_piece(record))
    return (
        f"{arm} seed {null_seed}: scale {calibration.scale:.4g}, KL {calibration.kl:.4f} from the SFT; Overall "
        f"{100 * (agg.overall or 0):.1f} over {agg.n_runs} runs -> {path} (commit it)"
    )
