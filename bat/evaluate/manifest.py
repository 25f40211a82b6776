"""Per-evaluation manifests: checkpoint digest, seeds, suite/harness/code versions, every run's identity."""

from __future__ import annotations

import datetime as _dt
import hashlib
from collections.abc import Sequence
from pathlib import Path

from bat.schemas.evaluation import EvalManifest, RunEntry
from bat.state.atomic import dumps_json
from bat.state.digest import sha256_path
from bat.version import code_version


def checkpoint_digest(path: str | Path) -> str:
    """sha256 of a checkpoint file or directory tree; a missing checkpoint is an error naming the path."""
    digest = sha256_path(path)
    if digest is None:
        raise FileNotFoundError(f"checkpoint {path} does not exist; cannot evaluate or digest it")
    return digest


def build_manifest(
    *,
    round_index: int,
    split: str,
    checkpoint: str | Path,
    digest: str,
    suite_version: str,
    harness_version: str,
    config_hash: str,
    run_seed: int,
    evaluator: str,
    sampling: dict[str, float | int],
    runs: Sequence[RunEntry],
) -> EvalManifest:
    """Assemble the manifest of one evaluation (runs sorted by track, repeat)."""
    return EvalManifest(
        round=round_index,
        split=split,  # type: ignore[arg-type]
        checkpoint=str(checkpoint),
        checkpoint_digest=digest,
        suite_version=suite_version,
        harness_version=harness_version,
        code_version=code_version(),
        config_hash=config_hash,
        run_seed=run_seed,
        evaluator=evaluator,
        sampling=dict(sampling),
        runs=sorted(runs, key=lambda r: (r.track, r.repeat)),
        created_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    )


def manifest_digest(manifest: EvalManifest) -> str:
    """sha256 of the manifest's identity (everything except its creation time)."""
    payload = manifest.model_dump(mode="json", exclude={"created_at"})
    return hashlib.sha256(dumps_json(payload).encode("utf-8")).hexdigest()
