"""The held-out fingerprint index: entries (kind, value, source) -> exact matcher, n-gram table, MinHash LSH.

Built from plain entries (the held-out side exports them; see `bat.leakage.heldout`), saved as a directory
(`entries.jsonl` + `INDEX.json`) with `atomic_dir`, and rebuilt from the entries on load with the scanner's
settings, so one exported index serves any shingle size or threshold.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

import ahocorasick

if TYPE_CHECKING:
    from datasketch import MinHash, MinHashLSH
from pydantic import BaseModel, ConfigDict, ValidationError

from bat.config.leakage import LeakageConfig
from bat.leakage import text as T
from bat.state.atomic import atomic_dir, atomic_write_json, read_json
from bat.state.jsonl import read_jsonl, write_jsonl
from bat.state.layout import FINGERPRINT_ENTRIES_NAME, FINGERPRINT_META_NAME

Kind = Literal["identifier", "path", "answer", "text", "field"]
KINDS: tuple[str, ...] = get_args(Kind)
INDEX_SCHEMA_VERSION = 1
MIN_NGRAM_WORDS = 4
"""Held-out texts shorter than `exact_ngram_words` but at least this long are matched as whole word runs."""


class Entry(BaseModel):
    """One fingerprint: `kind` (see KINDS), the held-out `value`, and an optional `source` label."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Kind
    value: str
    source: str = ""


def to_entry(item: Entry | tuple | list | dict, position: int = 0) -> Entry:
    """Coerce an Entry, a (kind, value[, source]) tuple or a dict; bad input raises naming KINDS."""
    if isinstance(item, Entry):
        entry = item
    else:
        try:
            if isinstance(item, dict):
                entry = Entry.model_validate(item)
            elif isinstance(item, (tuple, list)) and len(item) in (2, 3):
                entry = Entry(kind=item[0], value=item[1], source=item[2] if len(item) == 3 else "")
            else:
                raise ValueError(f"expected (kind, value[, source]), dict or Entry, got {item!r}")
        except (ValidationError, ValueError) as exc:
            raise ValueError(f"fingerprint entry #{position}: {exc}; valid kinds: {', '.join(KINDS)}") from exc
    if not entry.value.strip():
        raise ValueError(f"fingerprint entry #{position} ({entry.kind}) has an empty value")
    return entry


def entries_digest(entries: Iterable[Entry]) -> str:
    """`sha256:<hex>` over the sorted (kind, value, source) triples: equal entry sets, equal digest."""
    digest = hashlib.sha256()
    for kind, value, source in sorted((e.kind, e.value, e.source) for e in entries):
        digest.update(json.dumps([kind, value, source], ensure_ascii=False).encode("utf-8") + b"\n")
    return "sha256:" + digest.hexdigest()


@dataclass
class TextWindow:
    """One window of a held-out text: its shingle set and the entry it came from."""

    entry: int
    shingles: frozenset[int]


@dataclass
class FingerprintIndex:
    """Matchers built from the entries with one config's settings (see `build_index`)."""

    entries: list[Entry]
    config: LeakageConfig
    digest: str
    origin: dict[str, str] = field(default_factory=dict)
    """Where the entries came from (e.g. the digest of the benchmark config they were exported under)."""
    automaton: Any = None
    """pyahocorasick automaton: lower-cased pattern -> (pattern length, [(kind, entry position)])."""
    whole_values: dict[str, list[int]] = field(default_factory=dict)
    """Lower-cased short values (below `min_pattern_chars`) matched only as a whole string value."""
    field_names: dict[str, int] = field(default_factory=dict)
    """Normalised eval-derived field names -> entry position (-1 for config defaults)."""
    ngrams: dict[int, dict[int, int]] = field(default_factory=dict)
    """Word-run length n -> {stable hash of n words -> text entry position}."""
    windows: list[TextWindow] = field(default_factory=list)
    shingle_union: frozenset[int] = frozenset()
    """Every held-out window shingle: |A & union| / |A| bounds A's Jaccard with any window from above."""
    lsh: MinHashLSH | None = None
    template: MinHash | None = None
    """Empty MinHash with the index's permutations; signatures are copies of it (no re-initialisation)."""

    def counts(self) -> dict[str, int]:
        """Entries per kind (every kind present, zeros included)."""
        out = dict.fromkeys(KINDS, 0)
        for entry in self.entries:
            out[entry.kind] += 1
        return out

    def minhash(self, shingles: Iterable[int]) -> MinHash:
        """MinHash of hashed shingles with the index's permutations (identity hash on 64-bit ints)."""
        m = self.template.copy()
        m.update_batch(list(shingles))
        return m


def _identity(value: int) -> int:
    return value


def field_key(name: str) -> str:
    """Normalised field name: lower case, `-` and spaces as `_`."""
    return name.strip().lower().replace("-", "_").replace(" ", "_")


def build_index(entries: Iterable[Entry | tuple | list | dict], config: LeakageConfig) -> FingerprintIndex:
    """Build every matcher from `entries` (duplicates of (kind, value) keep the first source)."""
    unique: dict[tuple[str, str], Entry] = {}
    for position, item in enumerate(entries):
        entry = to_entry(item, position)
        unique.setdefault((entry.kind, entry.value), entry)
    items = list(unique.values())
    index = FingerprintIndex(entries=items, config=config, digest=entries_digest(items))
    from datasketch import MinHash, MinHashLSH  # 0.5 s of imports (scipy): deferred so `bat` commands stay light

    index.template = MinHash(
        num_perm=config.minhash_perms, seed=config.minhash_seed, hashfunc=_identity, scheme="affine64"
    )
    index.lsh = MinHashLSH(threshold=config.audit_floor, num_perm=config.minhash_perms)
    automaton = ahocorasick.Automaton()
    for name in config.eval_fields:
        index.field_names.setdefault(field_key(name), -1)
        _add_pattern(automaton, name.lower(), ("field", -1))
    for position, entry in enumerate(items):
        _add_entry(index, automaton, position, entry)
    if len(automaton):
        automaton.make_automaton()
        index.automaton = automaton
    index.shingle_union = frozenset().union(*(window.shingles for window in index.windows))
    return index


def _add_pattern(automaton: Any, pattern: str, hit: tuple[str, int]) -> None:
    """Register `pattern` -> (len(pattern), [hits]); a pattern shared by several entries keeps them all."""
    stored = automaton.get(pattern, None)
    if stored is None:
        automaton.add_word(pattern, (len(pattern), [hit]))
    elif hit not in stored[1]:
        stored[1].append(hit)


def _add_entry(index: FingerprintIndex, automaton: Any, position: int, entry: Entry) -> None:
    config = index.config
    value = entry.value.strip()
    if entry.kind == "text":
        _add_text(index, automaton, position, value)
        return
    if entry.kind == "field":
        index.field_names.setdefault(field_key(value), position)
    if len(value) < config.min_pattern_chars:
        index.whole_values.setdefault(value.lower(), []).append(position)
        return
    _add_pattern(automaton, value.lower(), (entry.kind, position))


def _add_text(index: FingerprintIndex, automaton: Any, position: int, value: str) -> None:
    config = index.config
    tokens = T.words(value)
    n = config.exact_ngram_words
    if n and len(tokens) >= n:
        table = index.ngrams.setdefault(n, {})
        for h in T.ngram_hashes(tokens, n):
            table.setdefault(h, position)
    elif n and len(tokens) >= MIN_NGRAM_WORDS:
        index.ngrams.setdefault(len(tokens), {}).setdefault(T.run_hash(tokens), position)
    elif len(value) >= config.min_pattern_chars:
        _add_pattern(automaton, value.lower(), ("text", position))
    if len(tokens) < config.min_text_words:
        return
    for window in T.windows(tokens, config.window_words):
        shingles = T.shingle_set(window, config.shingle_size)
        key = len(index.windows)
        index.windows.append(TextWindow(entry=position, shingles=shingles))
        index.lsh.insert(key, index.minhash(shingles))


def save_index(index: FingerprintIndex, path: str | os.PathLike[str]) -> Path:
    """Write `entries.jsonl` and `INDEX.json` (schema_version, counts, digest, origin) into `path` atomically."""
    with atomic_dir(path) as tmp:
        write_jsonl(tmp / FINGERPRINT_ENTRIES_NAME, index.entries)
        atomic_write_json(
            tmp / FINGERPRINT_META_NAME,
            {
                "schema_version": INDEX_SCHEMA_VERSION,
                "counts": index.counts(),
                "digest": index.digest,
                "origin": index.origin,
            },
        )
    return Path(path)


def read_index_meta(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """INDEX.json of an index directory, or None when there is none."""
    meta = Path(path) / FINGERPRINT_META_NAME
    return read_json(meta) if meta.is_file() else None


def load_index(path: str | os.PathLike[str], config: LeakageConfig) -> FingerprintIndex:
    """Read an index directory written by `save_index` and rebuild its matchers with `config`.

    Raises FileNotFoundError when the directory is incomplete and ValueError when the entries do not
    match the recorded digest or schema version.
    """
    root = Path(path)
    meta_path, entries_path = root / FINGERPRINT_META_NAME, root / FINGERPRINT_ENTRIES_NAME
    for needed in (meta_path, entries_path):
        if not needed.is_file():
            raise FileNotFoundError(f"fingerprint index {root} is incomplete: {needed.name} missing")
    meta = read_json(meta_path)
    if meta.get("schema_version") != INDEX_SCHEMA_VERSION:
        raise ValueError(
            f"{meta_path}: schema_version {meta.get('schema_version')!r} unsupported (valid: {INDEX_SCHEMA_VERSION})"
        )
    entries = read_jsonl(entries_path, Entry)
    index = build_index(entries, config)
    if index.digest != meta.get("digest"):
        raise ValueError(f"{root}: entries digest {index.digest} != recorded {meta.get('digest')}")
    index.origin = dict(meta.get("origin") or {})
    return index
