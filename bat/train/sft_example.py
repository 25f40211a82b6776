"""`Example`: one tokenized SFT sequence (ids, loss mask, source trajectory, the rows it carries)."""

from __future__ import annotations

from dataclasses import dataclass, field

from bat.schemas.bank import SftRow


@dataclass(frozen=True)
class Example:
    """One tokenized sequence: ids, 0/1 loss mask over the same positions, its source trajectory and how many
    SFT rows it carries (more than 1 after prefix packing, see `bat.train.sft_pack`)."""

    ids: list[int]
    mask: list[int]
    group: str
    rows: int = 1
    sources: tuple[SftRow, ...] = field(default=(), compare=False, repr=False)
    """The SftRows this sequence carries (what `renamed_example` re-encodes)."""
