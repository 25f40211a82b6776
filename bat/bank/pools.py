"""Bank index (state ids by track / stage / outcome / reward source) and the pools S-target / S-mix / E2E as views."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from bat.schemas.bank import E2E, BankIndex, BankRow

POOLS: tuple[str, ...] = ("S-target", "S-mix", "E2E")


def build_index(rows: Iterable[BankRow]) -> BankIndex:
    """Index rows by their four keys; id lists are sorted so the index is deterministic."""
    maps: dict[str, defaultdict[str, list[str]]] = {k: defaultdict(list) for k in ("track", "stage", "outcome", "rs")}
    seen: set[str] = set()
    for row in rows:
        if row.state_id in seen:
            raise ValueError(f"duplicate state_id {row.state_id!r} in bank rows")
        seen.add(row.state_id)
        maps["track"][row.track].append(row.state_id)
        maps["stage"][row.stage].append(row.state_id)
        maps["outcome"][row.outcome].append(row.state_id)
        maps["rs"][row.reward_source].append(row.state_id)

    def done(mapping: defaultdict[str, list[str]]) -> dict[str, list[str]]:
        return {key: sorted(ids) for key, ids in sorted(mapping.items())}

    return BankIndex(
        by_track=done(maps["track"]),
        by_stage=done(maps["stage"]),
        by_outcome=done(maps["outcome"]),
        by_reward_source=done(maps["rs"]),
    )


def pool_rows(
    index: BankIndex,
    pool: str,
    target_stage: str | None = None,
    *,
    tracks: Sequence[str] | None = None,
    outcomes: Sequence[str] | None = None,
) -> list[str]:
    """State ids of one pool: S-target = {s == target}, S-mix = {s in S minus target}, E2E = {s == E2E}.

    Optional `tracks` / `outcomes` narrow the view. Sorted, so a seeded sampler over it is deterministic.
    """
    if pool not in POOLS:
        raise ValueError(f"unknown pool {pool!r}; valid pools: {list(POOLS)}")
    stages = [s for s in index.by_stage if s != E2E]
    if pool in ("S-target", "S-mix"):
        if target_stage is None or target_stage == E2E:
            raise ValueError(f"pool {pool} needs a target stage; valid stages: {stages}")
        if target_stage not in stages:
            raise ValueError(f"target stage {target_stage!r} has no rows; stages in this bank: {stages}")
    if pool == "S-target":
        ids = set(index.by_stage[target_stage])  # type: ignore[index]
    elif pool == "S-mix":
        ids = {sid for s in stages if s != target_stage for sid in index.by_stage[s]}
    else:
        ids = set(index.by_stage.get(E2E, []))
    if tracks is not None:
        ids &= {sid for t in tracks for sid in index.by_track.get(t, [])}
    if outcomes is not None:
        ids &= {sid for o in outcomes for sid in index.by_outcome.get(o, [])}
    return sorted(ids)
