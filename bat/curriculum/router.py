"""Stage router (Eq. 5): target = lowest stage; after a held gate, the largest positive regression; ties -> earliest."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

TIE_TOL = 1e-12


def _ordered(scores: Mapping[str, float | None], stage_keys: Sequence[str]) -> list[str]:
    unknown = sorted(set(scores) - set(stage_keys))
    if unknown:
        raise ValueError(f"scores name unknown stages {unknown}; valid: {list(stage_keys)}")
    nulls = [k for k in stage_keys if k in scores and scores[k] is None]
    if nulls:
        raise ValueError(f"stage scores {nulls} are null; repair null cells before routing")
    order = [k for k in stage_keys if k in scores]
    if not order:
        raise ValueError(f"no stage scores to route on; expected some of {list(stage_keys)}")
    return order


def lowest_stage(scores: Mapping[str, float | None], stage_keys: Sequence[str]) -> str:
    """The stage with the lowest score; ties go to the earliest stage in `stage_keys`."""
    order = _ordered(scores, stage_keys)
    best = order[0]
    for key in order[1:]:
        if float(scores[key]) < float(scores[best]) - TIE_TOL:  # type: ignore[arg-type]
            best = key
    return best


def largest_regression(
    scores: Mapping[str, float | None], reference: Mapping[str, float | None], stage_keys: Sequence[str]
) -> str | None:
    """The stage whose score fell most below `reference` (positive regressions only); ties -> earliest; else None."""
    order = [k for k in _ordered(scores, stage_keys) if reference.get(k) is not None]
    chosen, chosen_drop = None, 0.0
    for key in order:
        drop = float(reference[key]) - float(scores[key])  # type: ignore[arg-type]
        if drop > TIE_TOL and (chosen is None or drop > chosen_drop + TIE_TOL):
            chosen, chosen_drop = key, drop
    return chosen


def route_target(
    scores: Mapping[str, float | None],
    stage_keys: Sequence[str],
    *,
    gate_held: bool = False,
    reference: Mapping[str, float | None] | None = None,
) -> tuple[str, str]:
    """(target stage, rule fired). `reference` = stage scores of the retained best checkpoint."""
    if gate_held:
        if reference is None:
            raise ValueError("a held gate needs the retained best's stage scores as `reference`")
        regressed = largest_regression(scores, reference, stage_keys)
        if regressed is not None:
            return regressed, "largest_regression"
    return lowest_stage(scores, stage_keys), "lowest"
