"""SFT rows -> token examples (loss only on the target, Eq. 10), overlong rejection, seeded batch order.

Rows are `bat.schemas.bank.SftRow` (context messages + one teacher target). A row longer than
`max_seq_len` tokens is rejected before training and counted, never clipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bat.config.sft import SftConfig
from bat.policy.tools import policy_tools
from bat.schemas.bank import SftRow
from bat.seeds import derive_seed
from bat.state.jsonl import read_jsonl
from bat.train.common import batch_indices  # noqa: F401  (re-exported)
from bat.train.sft_example import Example
from bat.train.sft_pack import pack_prefixes


@dataclass
class SftData:
    """Tokenized train/validation examples plus counts of what was kept and rejected.

    With `rename` set, `visit` re-encodes a sequence with fresh random practice identifiers
    (`bat.policy.rename`) using `tokenizer` and `tools`, the same ones the examples were encoded with."""

    train: list[Example]
    val: list[Example]
    counts: dict[str, int] = field(default_factory=dict)
    rename: bool = False
    tokenizer: Any = field(default=None, repr=False)
    tools: Sequence[dict[str, Any]] | None = None

    def visit(self, example: Example, seed: int) -> Example:
        """`example` as one visit sees it: renamed with `seed` when `rename` is set, else unchanged."""
        return renamed_example(example, seed, self.tokenizer, self.tools) if self.rename else example

    def validation(self, seed: int) -> list[Example]:
        """The validation sequences, each renamed with a fixed per-sequence seed when `rename` is set (so every
        validation pass scores the same names, none of them seen in training)."""
        return [self.visit(e, derive_seed(seed, "rename-validation", i)) for i, e in enumerate(self.val)]


def renamed_example(example: Example, seed: int, tokenizer: Any, tools: Sequence[dict[str, Any]] | None) -> Example:
    """`example`'s rows with every practice identifier renamed (one mapping for the whole sequence, seeded by
    `seed`), tokenized and prefix-packed again. Returns `example` itself when the renamed rows no longer pack
    into exactly one sequence or it carries no source rows."""
    from bat.policy.rename import Renamer, renamed_row

    if not example.sources:
        return example
    renamer = Renamer(seed)
    rows = [renamed_row(row, renamer) for row in example.sources]
    encoded, counts = encode_rows(rows, tokenizer, max_seq_len=10**9, tools=tools)
    if counts["kept"] != len(rows):
        return example
    packed = pack_prefixes(encoded)[0]
    return packed[0] if len(packed) == 1 else example


def read_sft_rows(paths: Iterable[str | Path]) -> list[SftRow]:
    """All SftRows of the given JSONL files, in file order (CorruptRecordError names file:line)."""
    rows: list[SftRow] = []
    for path in paths:
        rows.extend(read_jsonl(path, SftRow))
    return rows


def encode_rows(
    rows: Sequence[SftRow], tokenizer: Any, max_seq_len: int, tools: Sequence[dict[str, Any]] | None = None
) -> tuple[list[Example], dict[str, int]]:
    """Tokenize rows (tool list rendered into the system turn: `tools`, default the benchmark's TOOL_SPECS,
    `[]` for none); returns kept examples and counts {rows, kept, rejected_overlong, rejected_no_target}."""
    from bat.bank.sft import tokenize_sft_row

    kept: list[Example] = []
    counts = {"rows": len(rows), "kept": 0, "rejected_overlong": 0, "rejected_no_target": 0}
    for row in rows:
        ids, mask = tokenize_sft_row(row, tokenizer, tools)
        if len(ids) > max_seq_len:
            counts["rejected_overlong"] += 1
            continue
        if sum(mask[1:]) == 0:  # the first position is never predicted
            counts["rejected_no_target"] += 1
            continue
        kept.append(Example(ids=ids, mask=mask, group=row.trajectory_id, sources=(row,)))
    counts["kept"] = len(kept)
    return kept, counts


def _sequences(examples: list[Example], counts: dict[str, int], pack: bool) -> list[Example]:
    """`examples` prefix-packed when `pack`; adds sequences/target_tokens/tokens/tokens_unpacked to `counts`."""
    packed = pack_prefixes(examples)[0] if pack else examples
    counts.update(
        sequences=len(packed),
        target_tokens=sum(sum(e.mask[1:]) for e in packed),
        tokens=sum(len(e.ids) for e in packed),
        tokens_unpacked=sum(len(e.ids) for e in examples),
    )
    return packed


def prepare_sft(
    train_rows: Sequence[SftRow],
    val_rows: Sequence[SftRow],
    tokenizer: Any,
    max_seq_len: int,
    tools: Sequence[dict[str, Any]] | None = None,
    *,
    pack: bool = False,
    rename: bool = False,
) -> SftData:
    """Tokenize both splits (see `encode_rows` for `tools`) and merge their counts (`train_*`, `val_*`).

    Overlong rows are rejected row by row first; with `pack` each split is then prefix-packed on its own
    (`bat.train.sft_pack.pack_prefixes`; the split is by trajectory, packing never crosses one). Counts add
    `sequences`, `target_tokens` and `tokens` (ids fed per epoch) for each split. With `rename` every visit of a
    sequence sees fresh random practice identifiers (`SftData.visit`); overlong rejection uses the original rows."""
    train, train_counts = encode_rows(train_rows, tokenizer, max_seq_len, tools)
    val, val_counts = encode_rows(val_rows, tokenizer, max_seq_len, tools)
    if not train:
        raise ValueError(f"no SFT training rows left after rejection: {train_counts} (max_seq_len={max_seq_len})")
    train, val = _sequences(train, train_counts, pack), _sequences(val, val_counts, pack)
    counts = {f"train_{k}": v for k, v in train_counts.items()} | {f"val_{k}": v for k, v in val_counts.items()}
    return SftData(train=train, val=val, counts=counts, rename=rename, tokenizer=tokenizer, tools=tools)


def sft_data(
    sft: SftConfig,
    train_rows: Sequence[SftRow],
    val_rows: Sequence[SftRow],
    tokenizer: Any,
    specs: Sequence[dict[str, Any]] | None = None,
) -> SftData:
    """The data SFT trains on under `sft`: `prepare_sft` with `sft.max_seq_len`, the policy's tool list
    (`sft.render_tools`, `sft.tool_format`; `specs`: the benchmark's tool schemas, default the built-in ones),
    `sft.pack_prefixes` and `sft.rename_identifiers`. The one preparation the sft phase and `bat train sft` share."""
    return prepare_sft(
        train_rows,
        val_rows,
        tokenizer,
        sft.max_seq_len,
        tools=policy_tools(sft.render_tools, sft.tool_format, specs) or [],
        pack=sft.pack_prefixes,
        rename=sft.rename_identifiers,
    )


def collate(examples: Sequence[Example], pad_id: int) -> dict[str, Any]:
    """Right-padded `input_ids`, `attention_mask` and the shifted target `loss_mask` ([B, T-1])."""
    import torch

    width = max(len(e.ids) for e in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(examples), width), dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    for row, example in enumerate(examples):
        n = len(example.ids)
        ids[row, :n] = torch.tensor(example.ids)
        attn[row, :n] = 1
        mask[row, :n] = torch.tensor(example.mask)
    return {"input_ids": ids, "attention_mask": attn, "loss_mask": mask[:, 1:]}
