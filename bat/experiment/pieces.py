"""Committed pieces of an experiment: the record of every finished arm x seed and of every shared bootstrap, kept
beside the results (`<out_dir>/runs/`) so that a later run, on a fresh disk, merges what earlier ones finished.

An experiment too long for one machine's uninterrupted time runs in pieces: each piece finishes whole arm x seeds, and its records are
committed with the code that produced them. `collect` takes an arm x seed from its state dir when that dir holds a
finished run, else from its committed record. The shared bootstrap is rebuilt deterministically on the next disk;
its SFT digest is checked against the committed one, and arms trained from different bootstraps are named in the
budget audit (fp32 kernels round differently across CPU kinds, so a rebuild on another kind may differ).

Reads and writes `<out_dir>/runs/<arm>/seed_<s>.json` and `<out_dir>/runs/_shared/seed_<b>.json`
(`bat.state.experiment_layout`). A written record is never overwritten. An arm x seed rerun under a later change (a
new reward, a fix) is *superseded*: its record moves to `<out_dir>/superseded/<tag>/<arm>/seed_<s>.json` with the
reason, and is listed beside the results, never merged into them. When no committed trained arm is left on a
bootstrap (all were superseded, e.g. for a new bootstrap recipe), its record moves to `<tag>/_shared/` too.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

from bat.perf.machine import cpu_facts, isa_kind
from bat.state.atomic import atomic_write_json, read_json
from bat.state.experiment_layout import (
    PIECES_DIR_NAME,
    SHARED_PIECE_DIR_NAME,
    SUPERSEDED_DIR_NAME,
    arm_piece,
    shared_piece,
    superseded_piece,
)

PIECE_SCHEMA = 1
"""Version of a piece record's layout."""


def stamp_piece(body: dict[str, Any]) -> dict[str, Any]:
    """`body` with the piece schema, the commit that produced it, the CPU and the time (every committed record)."""
    from bat.experiment.write import git_commit

    return {
        "piece_schema": PIECE_SCHEMA,
        **body,
        "commit": git_commit(),
        "cpu": cpu_facts(),
        "recorded_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def write_arm_piece(out_dir: Path, arm: str, seed: int, result: dict[str, Any]) -> Path | None:
    """Record a finished arm x seed's collected `result` once; returns the path written, None when one exists
    already or the run is not finished (status other than `done`)."""
    path = arm_piece(out_dir, arm, seed)
    if path.exists() or result.get("status") != "done":
        return None
    return atomic_write_json(path, stamp_piece({"arm": arm, **result}))


def read_arm_piece(out_dir: Path, arm: str, seed: int) -> dict[str, Any] | None:
    """The committed result of `arm` x `seed` (with `source: committed`), or None."""
    path = arm_piece(out_dir, arm, seed)
    if not path.exists():
        return None
    record = read_json(path)
    return {**record, "source": "committed"}


def write_shared_piece(out_dir: Path, seed: int, record: dict[str, Any]) -> Path | None:
    """Record the shared bootstrap built with `seed` once (SFT digest, wall); None when one exists already."""
    path = shared_piece(out_dir, seed)
    if path.exists():
        return None
    return atomic_write_json(path, stamp_piece({"seed": seed, **record}))


def read_shared_piece(out_dir: Path, seed: int) -> dict[str, Any] | None:
    """The committed record of the bootstrap built with `seed`, or None."""
    path = shared_piece(out_dir, seed)
    return read_json(path) if path.exists() else None


def digest_check(out_dir: Path, seed: int, digest: str) -> str | None:
    """None when the bootstrap's SFT `digest` equals the committed one (or none is committed); else a message naming
    both digests and CPUs, for the log and the results."""
    committed = read_shared_piece(out_dir, seed)
    if committed is None or committed.get("sft_digest") == digest:
        return None
    then, now = committed.get("cpu", {}), cpu_facts()
    return (
        f"the shared bootstrap (seed {seed}) rebuilt with SFT digest {digest[:16]}, not the committed "
        f"{str(committed.get('sft_digest'))[:16]} ({shared_piece(out_dir, seed)}): built on {then.get('model')!r} "
        f"{isa_kind(then)}, now on {now.get('model')!r} {isa_kind(now)}. Arms run now train from another SFT checkpoint than "
        "the committed ones; the results' budget audit names them. To keep one bootstrap, check the SFT phase's "
        "pin (orchestrate.resources.sft.env; `python -m bat.perf.numerics` under it prints the same fingerprint on "
        "both CPUs when it holds), continue on the CPU kind that built it, or copy its state dir here."
    )


def committed_arms(out_dir: Path) -> dict[str, list[int]]:
    """Arm name -> seeds with a committed record under `<out_dir>/runs/` (for listings)."""
    root = Path(out_dir) / PIECES_DIR_NAME
    out: dict[str, list[int]] = {}
    if not root.is_dir():
        return out
    for arm_dir in sorted(p for p in root.iterdir() if p.is_dir() and p.name != SHARED_PIECE_DIR_NAME):
        seeds = sorted(int(p.stem.split("_", 1)[1]) for p in arm_dir.glob("seed_*.json") if p.stem[5:].isdigit())
        if seeds:
            out[arm_dir.name] = seeds
    return out


class SupersedeError(ValueError):
    """An arm x seed cannot be superseded under the given tag (no committed record, or the tag holds one already)."""


def supersede_arm_piece(out_dir: Path, arm: str, seed: int, tag: str, reason: str) -> Path:
    """Move the committed record of `arm` x `seed` to `<out_dir>/superseded/<tag>/`, stamped with `reason`, the time
    and the commit that superseded it; returns the new path. Raises SupersedeError when there is no committed record
    or `tag` already holds one for this arm x seed (nothing is moved then)."""
    src, dst = arm_piece(out_dir, arm, seed), superseded_piece(out_dir, tag, arm, seed)
    if not src.exists():
        raise SupersedeError(f"{src}: no committed record of arm {arm} seed {seed} to supersede")
    if dst.exists():
        raise SupersedeError(f"{dst} exists: arm {arm} seed {seed} was superseded under tag {tag!r} already")
    from bat.experiment.write import git_commit

    record = read_json(src)
    record["superseded"] = {
        "tag": tag,
        "reason": reason,
        "by_commit": git_commit(),
        "at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    atomic_write_json(dst, record)
    src.unlink()
    return dst


def retire_shared_piece(out_dir: Path, seed: int, tag: str, trained_arms: list[str]) -> Path | None:
    """Move the committed record of the bootstrap built with `seed` to `<out_dir>/superseded/<tag>/_shared/` when no
    committed record of a trained arm (`trained_arms`) still carries its SFT digest (every arm that trained from it
    was superseded), so that the next run records the bootstrap it builds instead of warning about a mismatch.
    Returns the new path, or None when the record is kept (or there is none)."""
    shared = read_shared_piece(out_dir, seed)
    if shared is None:
        return None
    for arm in trained_arms:
        for path in sorted((Path(out_dir) / PIECES_DIR_NAME / arm).glob("seed_*.json")):
            if read_json(path).get("shared_sft_digest") == shared.get("sft_digest"):
                return None
    dst = Path(out_dir) / SUPERSEDED_DIR_NAME / tag / SHARED_PIECE_DIR_NAME / f"seed_{seed}.json"
    if dst.exists():
        raise SupersedeError(f"{dst} exists: the bootstrap of seed {seed} was superseded under tag {tag!r} already")
    atomic_write_json(dst, shared)
    shared_piece(out_dir, seed).unlink()
    return dst


def superseded_records(out_dir: Path) -> list[dict[str, Any]]:
    """Every superseded arm x seed record under `<out_dir>/superseded/`, ordered by tag, arm and seed (retired
    bootstrap records under `<tag>/_shared/` are not arm records and are left out)."""
    root = Path(out_dir) / SUPERSEDED_DIR_NAME
    if not root.is_dir():
        return []
    paths = [p for p in sorted(root.glob("*/*/seed_*.json")) if p.parent.name != SHARED_PIECE_DIR_NAME]
    return [{**read_json(p), "source": "committed"} for p in paths]
