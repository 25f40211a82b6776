"""The row scanner: walks every key and string value of a row and checks it against the fingerprint index.

Exact held-out identifiers / paths / answers / short texts / eval field names: one Aho-Corasick pass per
string (case-insensitive, word-boundary checked). Held-out texts: verbatim word runs via a hash table and
paraphrases via MinHash LSH over word shingles, confirmed by exact shingle Jaccard. Index-free rules:
credentials, machine-specific absolute paths, and forbidden fields/roles in RL rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from bat.leakage import rules
from bat.leakage import text as T
from bat.leakage.findings import INDEX_KIND_TO_FINDING, Finding
from bat.leakage.index import FingerprintIndex, field_key

_CACHE_LIMIT = 20_000
_CACHE_MAX_CHARS = 4096
"""Per-string results are cached (system prompts and skills repeat across rows); long strings are not."""


@dataclass
class RowScan:
    """Result of scanning one row: findings and the highest near-duplicate Jaccard of any of its texts."""

    findings: list[Finding] = field(default_factory=list)
    max_similarity: float = 0.0
    texts_checked: int = 0
    """Strings long enough (>= `min_text_words`) to be compared with held-out texts."""


@dataclass
class _StringResult:
    findings: list[tuple[str, str, str, str]]
    """(kind, matched, detail, source) without a location, so results can be cached per string."""
    similarity: float
    text_checked: bool


def walk(obj: Any, location: str = "") -> Iterator[tuple[str, str, str | None, bool]]:
    """Yield (location, string, parent key, is_key) for every dict key and string value in a nested row.

    Keys are yielded with location `<path>{key}`; a string directly under a dict key has that key as
    parent (None otherwise); pydantic models are dumped to JSON first.
    """
    if isinstance(obj, BaseModel):
        obj = obj.model_dump(mode="json")
    if isinstance(obj, dict):
        for key, value in obj.items():
            key_text = str(key)
            yield f"{location}{{{key_text}}}", key_text, None, True
            child = f"{location}.{key_text}" if location else key_text
            if isinstance(value, str):
                yield child, value, key_text, False
            else:
                yield from walk(value, child)
    elif isinstance(obj, (list, tuple)):
        for position, value in enumerate(obj):
            child = f"{location}[{position}]"
            if isinstance(value, str):
                yield child, value, None, False
            else:
                yield from walk(value, child)
    elif isinstance(obj, str):
        yield location or "$", obj, None, False


class Scanner:
    """Checks rows against one `FingerprintIndex` with the index's config (see `LeakageConfig`)."""

    def __init__(self, index: FingerprintIndex) -> None:
        self.index = index
        self.config = index.config
        self.rl_forbidden = {field_key(name) for name in self.config.rl_forbidden_fields}
        self._cache: dict[str, _StringResult] = {}

    def scan_row(self, row: Any, rl_row: bool = False) -> RowScan:
        """Scan every key and string of `row` (dict / list / pydantic model / str); `rl_row` adds RL rules."""
        result = RowScan()
        for location, value, parent, is_key in walk(row):
            checked = self._check_string(value, is_key)
            result.max_similarity = max(result.max_similarity, checked.similarity)
            result.texts_checked += checked.text_checked
            for kind, matched, detail, source in checked.findings:
                result.findings.append(
                    Finding(kind=kind, location=location, matched=matched, detail=detail, source=source)
                )
            already = any(kind == "credential" for kind, *_ in checked.findings)
            if parent is not None and not already and rules.secret_value(parent, value):
                result.findings.append(
                    Finding(
                        kind="credential",
                        location=location,
                        matched=rules.redact(value.strip()),
                        detail=f"key {parent!r}",
                    )
                )
            if rl_row:
                result.findings.extend(self._rl_rules(location, value, parent, is_key))
        return result

    def _rl_rules(self, location: str, value: str, parent: str | None, is_key: bool) -> list[Finding]:
        """RL rows carry no assistant completions, answers or transcripts (CONTRACTS.md)."""
        if is_key and field_key(value) in self.rl_forbidden:
            return [
                Finding(kind="forbidden_field", location=location, matched=value, detail="key not allowed in RL rows")
            ]
        if parent == "role" and value.strip().lower() in ("assistant", "tool"):
            return [Finding(kind="forbidden_field", location=location, matched=value, detail="RL prompt message role")]
        return []

    def _check_string(self, value: str, is_key: bool) -> _StringResult:
        cache_key = ("k:" if is_key else "v:") + value
        cached = self._cache.get(cache_key)
        if cached is not None:
            return cached
        found: list[tuple[str, str, str, str]] = []
        self._exact(value, found)
        self._fields(value, found)
        if not is_key:
            for start, end, label in rules.find_credentials(value):
                found.append(("credential", rules.redact(value[start:end]), label, ""))
            for start, end, label in rules.find_machine_paths(value, self.config.allowed_abs_path_prefixes):
                found.append(("machine_path", T.snippet(value, start, end), label, ""))
        similarity = None if is_key else self._texts(value, found)
        result = _StringResult(findings=found, similarity=similarity or 0.0, text_checked=similarity is not None)
        if len(value) <= _CACHE_MAX_CHARS:
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[cache_key] = result
        return result

    def _exact(self, value: str, found: list[tuple[str, str, str, str]]) -> None:
        """Aho-Corasick pass over the lower-cased string, plus whole-value matches of short entries."""
        entries = self.index.entries
        if self.index.automaton is not None:
            lower = value.lower()
            spans = [
                (end - length + 1, end + 1, hits)
                for end, (length, hits) in self.index.automaton.iter(lower)
                if _bounded(lower, end - length + 1, end + 1)
            ]
            shown = value if len(lower) == len(value) else lower  # offsets are into `lower`
            seen: set[tuple[str, int]] = set()
            for start, stop, hits in spans:
                if any(s <= start and stop <= e and (s, e) != (start, stop) for s, e, _ in spans):
                    continue  # nested inside a longer match (an id inside a held-out path): report the longer
                for kind, position in hits:
                    if (kind, position) in seen:
                        continue
                    seen.add((kind, position))
                    source = entries[position].source if position >= 0 else "config:eval_fields"
                    found.append((INDEX_KIND_TO_FINDING[kind], T.snippet(shown, start, stop), f"{kind} entry", source))
        for position in self.index.whole_values.get(value.strip().lower(), ()):
            entry = entries[position]
            found.append(
                (INDEX_KIND_TO_FINDING[entry.kind], value.strip()[:80], f"whole-value {entry.kind}", entry.source)
            )

    def _fields(self, value: str, found: list[tuple[str, str, str, str]]) -> None:
        """A key or whole value equal to an eval-derived field name."""
        position = self.index.field_names.get(field_key(value))
        if position is None:
            return
        if any(kind == "eval_field" for kind, *_ in found):
            return
        source = self.index.entries[position].source if position >= 0 else "config:eval_fields"
        found.append(("eval_field", value.strip()[:80], "eval-derived field", source))

    def _texts(self, value: str, found: list[tuple[str, str, str, str]]) -> float | None:
        """Verbatim held-out word runs and MinHash near-duplicates; returns the best Jaccard seen, or None
        when the string is too short for the near-duplicate check."""
        tokens = T.words(value)
        if not tokens:
            return None
        entries = self.index.entries
        verbatim: set[int] = set()
        for n, table in self.index.ngrams.items():
            for start, h in enumerate(T.ngram_hashes(tokens, n)):
                position = table.get(h)
                if position is not None:
                    run = " ".join(tokens[start : start + n])
                    found.append(("text_ngram", run[:80], f"{n}-word run of a held-out text", entries[position].source))
                    verbatim.add(position)
                    break
        if len(tokens) < self.config.min_text_words:
            return None
        if not self.index.windows:
            return 0.0
        best, best_entry, best_window = 0.0, -1, tokens
        union, floor = self.index.shingle_union, self.config.audit_floor
        for window in T.windows(tokens, self.config.window_words):
            shingles = T.shingle_set(window, self.config.shingle_size)
            if len(shingles & union) < floor * len(shingles):
                continue  # exact bound: Jaccard with every held-out window is below the audit floor
            for key in self.index.lsh.query(self.index.minhash(shingles)):
                candidate = self.index.windows[key]
                similarity = T.jaccard(shingles, candidate.shingles)
                if similarity > best:
                    best, best_entry, best_window = similarity, candidate.entry, window
        if best >= self.config.jaccard_threshold and not verbatim:  # a verbatim run already flags the string
            found.append(
                ("near_duplicate", " ".join(best_window[:12])[:80], f"jaccard={best:.3f}", entries[best_entry].source)
            )
        return best


def _bounded(text: str, start: int, end: int) -> bool:
    """True when the match text[start:end] is not glued to word characters on a word-character edge."""
    if start > 0 and _word(text[start]) and _word(text[start - 1]):
        return False
    return not (end < len(text) and _word(text[end - 1]) and _word(text[end]))


def _word(char: str) -> bool:
    return char.isalnum() or char == "_"
