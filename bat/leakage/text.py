"""Text normalisation for leakage checks: words, word k-shingles, windows and stable 64-bit hashes.

Held-out texts and bank strings go through the same functions, so a brief that differs only in case,
punctuation or spacing produces identical shingles.
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata

import numpy as np

_WORD_RE = re.compile(r"[a-z0-9]+")
_BASE = np.uint64(0x100000001B3)


def words(text: str) -> list[str]:
    """Lower-cased alphanumeric words of `text` after NFKC normalisation (punctuation dropped)."""
    return _WORD_RE.findall(unicodedata.normalize("NFKC", text).lower())


def stable_hash(text: str) -> int:
    """Unsigned 64-bit hash of `text` that is the same in every process (blake2b)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


@functools.lru_cache(maxsize=1 << 18)
def _word_hash(word: str) -> int:
    return stable_hash(word)


def _fmix64(values: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser (wrapping uint64 arithmetic): spreads the polynomial sums."""
    values = values ^ (values >> np.uint64(33))
    values = values * np.uint64(0xFF51AFD7ED558CCD)
    values = values ^ (values >> np.uint64(33))
    values = values * np.uint64(0xC4CEB9FE1A85EC53)
    return values ^ (values >> np.uint64(33))


def ngram_hashes(tokens: list[str], n: int) -> list[int]:
    """Stable 64-bit hashes of every run of `n` consecutive words (none when there are fewer than `n`).

    Each word is hashed once (blake2b, cached); a run's hash is a polynomial over its word hashes
    (wrapping uint64) passed through a 64-bit finaliser, computed for all runs at once with numpy.
    """
    if n <= 0 or len(tokens) < n:
        return []
    word_hashes = np.fromiter((_word_hash(w) for w in tokens), dtype=np.uint64, count=len(tokens))
    count = len(tokens) - n + 1
    acc = np.zeros(count, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(n):
            acc = acc * _BASE + word_hashes[j : j + count]
        return _fmix64(acc + np.uint64(n)).tolist()


def run_hash(tokens: list[str]) -> int:
    """Hash of one whole word run, equal to `ngram_hashes(tokens, len(tokens))[0]`."""
    return ngram_hashes(tokens, len(tokens))[0]


def shingle_set(tokens: list[str], k: int) -> frozenset[int]:
    """Set of hashed word k-shingles; a text shorter than `k` words becomes one shingle of all its words."""
    if not tokens:
        return frozenset()
    if len(tokens) < k:
        return frozenset((run_hash(tokens),))
    return frozenset(ngram_hashes(tokens, k))


def windows(tokens: list[str], size: int, stride: int | None = None) -> list[list[str]]:
    """Windows of `size` words every `stride` words (default `size // 2`); the last one ends at the last word."""
    if len(tokens) <= size:
        return [tokens] if tokens else []
    stride = max(1, stride or size // 2)
    starts = list(range(0, len(tokens) - size + 1, stride))
    if starts[-1] != len(tokens) - size:
        starts.append(len(tokens) - size)
    return [tokens[s : s + size] for s in starts]


def jaccard(a: frozenset[int], b: frozenset[int]) -> float:
    """Exact Jaccard similarity of two shingle sets (0.0 when both are empty)."""
    if not a and not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def snippet(text: str, start: int, end: int, width: int = 80) -> str:
    """The matched span `text[start:end]` with a little context, at most `width` characters."""
    pad = max(0, (width - (end - start)) // 2)
    lo, hi = max(0, start - pad), min(len(text), end + pad)
    piece = text[lo:hi].replace("\n", " ")
    return piece[:width]
