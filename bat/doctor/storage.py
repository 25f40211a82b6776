"""The model folder and cache readable, the state dir and node-local scratch writable, and their free space
(`bat doctor`). Reads the config, the file system and `shutil.disk_usage`; writes one probe file per writable folder
and removes it again.

Free-space needs are estimates from the policy's size (`ModelShape.parameter_count` x `model.dtype`'s bytes):

* state: the SFT export and one candidate export per round (`run.rounds + 1` copies of the weights) plus
  `grpo.keep_checkpoints` step checkpoints holding the weights and AdamW's fp32 state (12 bytes a parameter);
* scratch (`orchestrate.container.scratch`, bound over /tmp in the container): `SCRATCH_FLOOR_GIB` for HF_HOME and
  the serving engine's compile caches.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from bat.doctor.finding import Finding, ok, problem, unused

if TYPE_CHECKING:
    from bat.config.root import BatConfig

GIB = 2**30
SCRATCH_FLOOR_GIB = 20.0
"""Free space a phase wants on node-local scratch: HF_HOME, vLLM/SGLang/Triton compile caches, the Slurm relay."""
ADAM_BYTES = 12
"""AdamW state per parameter in a step checkpoint: fp32 master weights, m and v."""


def state_need_bytes(config: BatConfig) -> tuple[float, str]:
    """Free space a whole run wants in its state dir (estimate) and how it was counted."""
    from bat.orchestrate.plan_memory import PRECISION_BYTES

    try:
        params = config.model.planned_shape()[0].parameter_count()
    except ValueError:
        return 0.0, "no model shape known"
    width = PRECISION_BYTES[config.model.dtype]
    copies, keep = config.run.rounds + 1, config.grpo.keep_checkpoints
    need = copies * params * width + keep * params * (width + ADAM_BYTES)
    how = f"{copies} exports x {params * width / GIB:.1f} GiB + {keep} step checkpoints with AdamW state"
    return need, how


def writable_probe(folder: Path) -> str | None:
    """Create and remove a file in `folder` (or its nearest existing parent, which the run would create it in);
    None when that works, else why not."""
    target = folder
    while not target.exists() and target != target.parent:
        target = target.parent
    if not target.is_dir():
        return f"{target} is not a folder"
    try:
        with tempfile.NamedTemporaryFile(dir=target, prefix=".bat-doctor-"):
            pass
    except OSError as exc:
        return f"cannot write in {target}: {exc.strerror or exc}"
    return None


def _space(name: str, folder: Path, need: float, how: str, fix: str) -> Finding:
    """Writable and free space against `need` bytes."""
    why = writable_probe(folder)
    if why:
        return problem(name, why, fix)
    target = folder if folder.exists() else next(p for p in folder.parents if p.exists())
    free = shutil.disk_usage(target).free
    seen = f"{folder}: writable, {free / GIB:.1f} GiB free"
    if need and free < need:
        return problem(name, f"{seen}, a run wants ~{need / GIB:.1f} GiB ({how})", fix)
    return ok(name, seen + (f" (a run wants ~{need / GIB:.1f} GiB: {how})" if need else ""))


def scratch_path(config: BatConfig) -> Path:
    """`orchestrate.container.scratch` as a job would expand it here (`${SLURM_TMPDIR:-/tmp}` and $VARS)."""
    text = config.orchestrate.container.scratch.replace("${SLURM_TMPDIR:-/tmp}", os.environ.get("SLURM_TMPDIR", "/tmp"))
    return Path(os.path.expandvars(text))


def check_storage(config: BatConfig, state: Path) -> list[Finding]:
    """State dir and scratch: writable, with free space for a run."""
    need, how = state_need_bytes(config)
    findings = [
        _space("state dir", state, need, how, "point --state / $BAT_STATE at a shared file system with room"),
        _space(
            "scratch",
            scratch_path(config),
            SCRATCH_FLOOR_GIB * GIB,
            "HF_HOME and engine caches",
            "set orchestrate.container.scratch to node-local storage with room (e.g. ${SLURM_TMPDIR:-/tmp})",
        ),
    ]
    return findings


def _readable_tree(folder: Path) -> str | None:
    """None when every file directly in `folder` can be opened for reading; else the first that cannot."""
    for path in sorted(folder.iterdir()):
        if path.is_file():
            try:
                with open(path, "rb") as handle:
                    handle.read(1)
            except OSError as exc:
                return f"{path}: {exc.strerror or exc}"
    return None


def check_model(config: BatConfig) -> list[Finding]:
    """`model.path` (config.json and weights readable) and the model cache (writable)."""
    from bat.state.layout import model_cache_root

    mc = config.model
    findings = []
    if mc.path is None:
        source = f"model.pretrained {mc.pretrained}" if mc.pretrained else "the tiny model (built in the state dir)"
        findings.append(unused("model path", f"no model.path: {source}"))
    else:
        folder = Path(mc.path)
        weights = sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin")) if folder.is_dir() else []
        bad = _readable_tree(folder) if folder.is_dir() else None
        if not folder.is_dir():
            findings.append(
                problem(
                    "model path",
                    f"model.path {mc.path} is not a folder on this node",
                    "copy the HF checkpoint to a file system every node mounts (bat never downloads weights) and set "
                    "model.path to it",
                )
            )
        elif not (folder / "config.json").is_file() or not weights or bad:
            why = bad or f"config.json present: {(folder / 'config.json').is_file()}, weight files: {len(weights)}"
            findings.append(problem("model path", f"{mc.path}: {why}", "give a complete, readable HF model folder"))
        else:
            size = sum(w.stat().st_size for w in weights) / GIB
            findings.append(ok("model path", f"{mc.path}: config.json and {len(weights)} weight files, {size:.1f} GiB"))
    cache = model_cache_root(mc.cache_dir)
    if mc.pretrained is None and mc.cache_dir is None:
        findings.append(unused("model cache", f"{cache}: used only by model.pretrained"))
    else:
        why = writable_probe(cache)
        fix = "set model.cache_dir (or $BAT_MODEL_CACHE) to a writable folder every node sees"
        findings.append(problem("model cache", why, fix) if why else ok("model cache", f"{cache}: writable"))
    return findings
