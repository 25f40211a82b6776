"""Learning-rate probe of a finished one-step GRPO round, without training again.

A GRPO block starts a fresh optimizer (the optimizer reset between rounds). AdamW's first step is
`lr * g / (|g| + eps)` plus `lr * weight_decay * theta` (clipping rescales g, which the ratio cancels); SGD's
(`grpo.optimizer: sgd`) is `lr * (clipped g + weight_decay * theta)`: both linear in lr for a fixed gradient. So
the candidate that the round's step would have written at `scale * lr` is `start + scale * (candidate - start)`,
exactly up to float rounding. The probe writes those candidates, measures
each one's KL to the start policy on the bank's KL probe rows (the route's own measure) and evaluates each on the
controller split (the routing split; aggregates only) under the run's held-out secret, so every candidate meets
the same evaluation draws.

Reads the round's grpo DONE marker (start checkpoint, candidate, steps, lr), the two checkpoints, the run's bank
and held-out secret. Writes under `out` only: `ckpt/x<scale>/` (the scaled weights), `x<scale>/` (a run dir with a
copy of the secret: the controller evaluation) and `lr_probe.json` (one row per scale). Scales already evaluated in
`out` are read back, never re-run. With `evaluate=False` (a KL screen, seconds per scale) the rows carry the KL only;
a later evaluating call evaluates those scales. `candidate` replaces the round's recorded candidate with another
one-step candidate from the same start checkpoint (e.g. `bat train grpo` on the round's rollouts under other
settings): an A/B of the step on identical rollouts and identical evaluation draws.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.state.atomic import atomic_write_json, read_json
from bat.state.checkpoints import EXPORT_META_NAME
from bat.state.layout import RunLayout
from bat.state.markers import read_done

if TYPE_CHECKING:
    from bat.config.root import BatConfig

WEIGHTS = "model.safetensors"
RESULTS = "lr_probe.json"


def scale_name(scale: float) -> str:
    """`x0`, `x0.5`, `x10`: the folder of one scale under the probe's out dir."""
    return f"x{scale:g}"


def one_step_block(layout: RunLayout, round_index: int) -> dict[str, Any]:
    """The round's finished GRPO block: start checkpoint, candidate and lr. Raises ValueError when the round has no
    finished grpo phase, or its block ran more than one step (the probe's identity holds for one step only)."""
    done = read_done(layout.phase_dir(round_index, "grpo"))
    if done is None:
        raise ValueError(f"round {round_index} of {layout.root} has no finished grpo phase (no DONE.json)")
    steps = int(done.counts.get("step", 0))
    if steps != 1:
        raise ValueError(
            f"round {round_index}'s GRPO block ran {steps} steps: the lr probe needs a one-step block (grpo.steps=1), "
            "where the step from a fresh optimizer is linear in lr"
        )
    extra = done.extra
    try:
        return {
            "start": Path(extra["start_checkpoint"]),
            "candidate": Path(extra["candidate"]),
            "lr": float(extra["last_step"]["lr"]),
        }
    except (KeyError, TypeError, ValueError):
        raise ValueError(
            f"{layout.phase_dir(round_index, 'grpo')}/DONE.json does not record start_checkpoint, candidate and "
            "last_step.lr (written by an older bat?): rerun the round's grpo phase to probe it"
        ) from None


def write_scaled(start: Path, candidate: Path, scale: float, out: Path, dtype: str = "float32") -> Path:
    """Write `start + scale * (candidate - start)` (every parameter, computed in float64, stored in `dtype`) as an
    HF export at `out` with the candidate's tokenizer and chat template; returns `out`. An existing complete export
    is kept."""
    import torch

    from bat.policy.loader import load_model

    if (out / WEIGHTS).exists():
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
) -> list[dict[str, Any]]:
    """For each scale: the scaled candidate (scale 0 = the start checkpoint, 1 = the recorded candidate), its KL to
    the start policy and (with `evaluate`) its controller evaluation. Returns (and writes to `out/lr_probe.json`) one
    row per scale: scale, lr, checkpoint, kl_to_start, evaluated, overall, task, agentic, stages, n_runs, seconds
    (the evaluation's fields None / empty / 0 when not evaluated)."""
    from bat.benchmark.secret import install_secret
    from bat.curriculum.kl import probe_prompts
    from bat.seeds import derive_seed
    from bat.train.kl_estimate import estimate_kl

    block = one_step_block(layout, round_index)
    if candidate is not None:
        if not (candidate / "config.json").is_file():
            raise ValueError(
                f"--candidate {candidate} is not an HF export (no config.json): pass the export folder a one-step "
                f"GRPO run from {block['start']} wrote (`bat train grpo ... --out DIR` writes DIR/export)"
            )
        block["candidate"] = candidate
    if not layout.heldout_secret.exists():
        raise ValueError(
            f"{layout.heldout_secret} is missing: the probe evaluates on the run's own held-out suite, and a run "
            "that finished a GRPO round has one (was the run's heldout/ folder moved?)"
        )
    prompts = probe_prompts(layout, cfg)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for scale in scales:
        name = scale_name(scale)
        probe_layout = RunLayout(out / name)
        recorded = _read_row(out, name)
        if recorded is not None and (recorded.get("evaluated", True) or not evaluate):
            rows.append(recorded)
            continue
        started = time.monotonic()
        if scale == 0:
            checkpoint = block["start"]
        elif scale == 1:
            checkpoint = block["candidate"]
        else:
            checkpoint = write_scaled(
                block["start"], block["candidate"], scale, out / "ckpt" / name, dtype=cfg.model.dtype
            )
        kl = 0.0
        if scale != 0 and prompts:
            kl = float(
                estimate_kl(
                    checkpoint,
                    block["start"],
                    prompts,
                    max_new_tokens=cfg.curriculum.fallback.kl_new_tokens,
                    seed=derive_seed(cfg.run.seed, round_index, "lr_probe_kl"),
                    dtype=cfg.model.dtype,
                )
            )
        probe_layout.ensure()
        row = {
            "scale": scale,
            "lr": scale * block["lr"],
            "checkpoint": str(checkpoint),
            "kl_to_start": kl if prompts else None,
            "evaluated": evaluate,
            "overall": None,
            "task": None,
            "agentic": None,
            "stages": {},
            "n_runs": 0,
        }
        if evaluate:
            install_secret(layout.heldout_secret, probe_layout.heldout_secret)
            agg = _evaluate(cfg, probe_layout, round_index, checkpoint)
            row.update(overall=agg.overall, task=agg.task, agentic=agg.agentic, stages=dict(agg.stages))
            row["n_runs"] = agg.n_runs
        row["seconds"] = round(time.monotonic() - started, 1)
        atomic_write_json(probe_layout.root / "lr_probe_row.json", row)
        rows.append(row)
    atomic_write_json(out / RESULTS, {"round": round_index, "run": str(layout.root), "lr": block["lr"], "rows": rows})
    return rows


def _read_row(out: Path, name: str) -> dict[str, Any] | None:
    path = out / name / "lr_probe_row.json"
    return read_json(path) if path.exists() else None


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
