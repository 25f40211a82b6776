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
from typing import TypeVar

from bat.experiment.records import load_record, read_record, read_records, write_record
from bat.perf.machine import cpu_facts, isa_kind
from bat.schemas.experiment import PIECE_SCHEMA, CpuFacts, PieceStamp, SeedRun, SharedRecord, Supersession
from bat.state.experiment_layout import ResultsLayout

P = TypeVar("P", bound=PieceStamp)


def stamp_piece(record: P) -> P:
    """`record` with the piece schema, the commit that produced it, the CPU and the time (every committed record)."""
    from bat.experiment.write import git_commit

    return record.model_copy(
        update={
            "piece_schema": PIECE_SCHEMA,
            "commit": git_commit(),
            "cpu": CpuFacts(**cpu_facts()),
            "recorded_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        }
    )


def write_arm_piece(out_dir: Path, arm: str, seed: int, result: SeedRun) -> Path | None:
    """Record a finished arm x seed's collected `result` once; returns the path written, None when one exists
    already or the run is not finished (status other than `done`)."""
    path = ResultsLayout(out_dir).arm_piece(arm, seed)
    if path.exists() or not result.done:
        return None
    return write_record(path, stamp_piece(result.model_copy(update={"arm": arm})))


def read_arm_piece(out_dir: Path, arm: str, seed: int) -> SeedRun | None:
    """The committed result of `arm` x `seed` (with `source: committed`), or None."""
    record = read_record(ResultsLayout(out_dir).arm_piece(arm, seed), SeedRun)
    return None if record is None else record.model_copy(update={"source": "committed"})


def write_shared_piece(out_dir: Path, seed: int, sft_digest: str, wall_s: float) -> Path | None:
    """Record the shared bootstrap built with `seed` once (SFT digest, wall); None when one exists already."""
    path = ResultsLayout(out_dir).shared_piece(seed)
    if path.exists():
        return None
    return write_record(path, stamp_piece(SharedRecord(seed=seed, sft_digest=sft_digest, wall_s=wall_s)))


def read_shared_piece(out_dir: Path, seed: int) -> SharedRecord | None:
    """The committed record of the bootstrap built with `seed`, or None."""
    return read_record(ResultsLayout(out_dir).shared_piece(seed), SharedRecord)


def digest_check(out_dir: Path, seed: int, digest: str) -> str | None:
    """None when the bootstrap's SFT `digest` equals the committed one (or none is committed); else a message naming
    both digests and CPUs, for the log and the results."""
    committed = read_shared_piece(out_dir, seed)
    if committed is None or committed.sft_digest == digest:
        return None
    then, now = (committed.cpu or CpuFacts()).model_dump(), cpu_facts()
    return (
        f"the shared bootstrap (seed {seed}) rebuilt with SFT digest {digest[:16]}, not the committed "
        f"{committed.sft_digest[:16]} ({ResultsLayout(out_dir).shared_piece(seed)}): built on {then.get('model')!r} "
        f"{isa_kind(then)}, now on {now.get('model')!r} {isa_kind(now)}. Arms run now train from another SFT checkpoint than "
        "the committed ones; the results' budget audit names them. To keep one bootstrap, check the SFT phase's "
        "pin (orchestrate.resources.sft.env; `python -m bat.perf.numerics` under it prints the same fingerprint on "
        "both CPUs when it holds), continue on the CPU kind that built it, or copy its state dir here."
    )


def committed_arms(out_dir: Path) -> dict[str, list[int]]:
    """Arm name -> seeds with a committed record under `<out_dir>/runs/` (for listings)."""
    return ResultsLayout(out_dir).committed_seeds()


class SupersedeError(ValueError):
    """An arm x seed cannot be superseded under the given tag (no committed record, or the tag holds one already)."""


def supersede_arm_piece(out_dir: Path, arm: str, seed: int, tag: str, reason: str) -> Path:
    """Move the committed record of `arm` x `seed` to `<out_dir>/superseded/<tag>/`, stamped with `reason`, the time
    and the commit that superseded it; returns the new path. Raises SupersedeError when there is no committed record
    or `tag` already holds one for this arm x seed (nothing is moved then)."""
    results = ResultsLayout(out_dir)
    src, dst = results.arm_piece(arm, seed), results.superseded_piece(tag, arm, seed)
    if not src.exists():
        raise SupersedeError(f"{src}: no committed record of arm {arm} seed {seed} to supersede")
    if dst.exists():
        raise SupersedeError(f"{dst} exists: arm {arm} seed {seed} was superseded under tag {tag!r} already")
    from bat.experiment.write import git_commit

    record = load_record(src, SeedRun)
    record.superseded = Supersession(
        tag=tag,
        reason=reason,
        by_commit=git_commit(),
        at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    )
    write_record(dst, record)
    src.unlink()
    return dst


def retire_shared_piece(out_dir: Path, seed: int, tag: str, trained_arms: list[str]) -> Path | None:
    """Move the committed record of the bootstrap built with `seed` to `<out_dir>/superseded/<tag>/_shared/` when no
    committed record of a trained arm (`trained_arms`) still carries its SFT digest (every arm that trained from it
    was superseded), so that the next run records the bootstrap it builds instead of warning about a mismatch.
    Returns the new path, or None when the record is kept (or there is none)."""
    results = ResultsLayout(out_dir)
    shared = read_shared_piece(out_dir, seed)
    if shared is None:
        return None
    for arm in trained_arms:
        if any(r.shared_sft_digest == shared.sft_digest for r in read_records(results.arm_pieces(arm), SeedRun)):
            return None
    dst = results.superseded_shared(tag, seed)
    if dst.exists():
        raise SupersedeError(f"{dst} exists: the bootstrap of seed {seed} was superseded under tag {tag!r} already")
    write_record(dst, shared)
    results.shared_piece(seed).unlink()
    return dst


def superseded_records(out_dir: Path) -> list[SeedRun]:
    """Every superseded arm x seed record under `<out_dir>/superseded/`, ordered by tag, arm and seed (retired
    bootstrap records under `<tag>/_shared/` are not arm records and are left out)."""
    paths = ResultsLayout(out_dir).superseded_pieces()
    return [r.model_copy(update={"source": "committed"}) for r in read_records(paths, SeedRun)]
