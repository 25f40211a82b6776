"""Prefix-sharing packing of SFT examples: rows of one trajectory that are token prefixes of a longer row share it.

Row i of a trajectory (Eq. 9) is `context_i + target_i`; when those ids are an exact token prefix of a longer
row j of the same trajectory (same system turn, same history), row i's target already lies inside row j's
context. Under causal attention every target token then sees exactly its own row's context, so one forward pass
over row j with the loss mask marking both targets gives the same per-token losses as two passes. Only exact
token-prefix matches are merged; target spans never overlap (a duplicate row stays a separate sequence), and a
packed sequence is always one real row's ids, so it never exceeds the row-level `max_seq_len`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from bat.train.sft_example import Example


@dataclass
class _Open:
    """A sequence being filled: the ids of its longest row, the merged mask and how many rows it carries."""

    ids: list[int]
    mask: list[int]
    group: str
    rows: int = 1
    targets: set[int] = field(default_factory=set)
    sources: list = field(default_factory=list)

    def accepts(self, example: Example) -> bool:
        """True when `example`'s ids are a token prefix of this sequence and its targets land on context tokens."""
        n = len(example.ids)
        if n > len(self.ids) or self.ids[:n] != example.ids:
            return False
        return not any(m and i in self.targets for i, m in enumerate(example.mask))

    def add(self, example: Example) -> None:
        for i, m in enumerate(example.mask):
            if m:
                self.mask[i] = 1
                self.targets.add(i)
        self.rows += example.rows
        self.sources.extend(example.sources)


def pack_prefixes(examples: Sequence[Example]) -> tuple[list[Example], dict[str, int]]:
    """Merge examples of one `group` whose ids are a token prefix of a longer example's context.

    Reads only `examples` (already tokenized, overlong rows already rejected). Returns the packed examples
    (in the order of each sequence's longest row's first appearance; `rows` = rows carried) and counts
    {rows, sequences, target_tokens, tokens_unpacked, tokens_packed}. Deterministic for a given input order.
    """
    by_group: dict[str, list[int]] = {}
    for index, example in enumerate(examples):
        by_group.setdefault(example.group, []).append(index)
    opened: list[tuple[int, _Open]] = []
    for indices in by_group.values():
        mine: list[tuple[int, _Open]] = []
        for index in sorted(indices, key=lambda k: (-len(examples[k].ids), k)):
            example = examples[index]
            host = next((seq for _, seq in mine if seq.accepts(example)), None)
            if host is None:
                seq = _Open(
                    ids=list(example.ids),
                    mask=list(example.mask),
                    group=example.group,
                    rows=example.rows,
                    targets={i for i, m in enumerate(example.mask) if m},
                    sources=list(example.sources),
                )
                mine.append((index, seq))
            else:
                host.add(example)
        opened.extend(mine)
    opened.sort(key=lambda item: item[0])
    packed = [
        Example(ids=seq.ids, mask=seq.mask, group=seq.group, rows=seq.rows, sources=tuple(seq.sources))
        for _, seq in opened
    ]
    counts = {
        "rows": sum(e.rows for e in examples),
        "sequences": len(packed),
        "target_tokens": sum(sum(e.mask[1:]) for e in examples),
        "tokens_unpacked": sum(len(e.ids) for e in examples),
        "tokens_packed": sum(len(e.ids) for e in packed),
    }
    if counts["target_tokens"] != sum(sum(e.mask[1:]) for e in packed):
        raise RuntimeError(f"packing changed the number of target tokens: {counts}")
    return packed, counts
