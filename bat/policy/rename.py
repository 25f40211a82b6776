"""Identifier renaming for SFT: every visit of a row sees fresh random names for the practice identifiers.

Why: the practice space draws model names from 10 adjectives x 10 nouns, so a policy can lower its loss by
memorising those words instead of copying the name out of its context. Held-out tasks use a disjoint vocabulary
(`bat.benchmark.vocab`), so a memorising policy never names a held-out model (measured, `docs/results/RUNS.md`: identifier
tokens sat at 2.40 nats, about ln 10, after 300 steps). Renaming each practice identifier to a random
letter string, consistently within one training sequence, makes copying the only way to predict a name.

Reads only practice rows and the practice vocabulary's patterns; generated words never equal a word of any
seed space's vocabulary (so no held-out word is ever produced, and nothing held-out is read).
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Callable

from bat.benchmark.vocab import PRACTICE, SPACES, Vocab
from bat.schemas.bank import SftRow
from bat.seeds import derive_seed

LETTERS = string.ascii_lowercase
HEX = "0123456789abcdef"
_RESERVED = frozenset(w for v in SPACES.values() for w in (*v.adjectives, *v.nouns))
_PATTERNS: dict[str, re.Pattern[str]] = {}


def identifier_pattern(v: Vocab = PRACTICE) -> re.Pattern[str]:
    """One regex with a named group per identifier kind of space `v`: model, package, case, instance, prefix
    (compiled once per space)."""
    if v.space not in _PATTERNS:
        _PATTERNS[v.space] = _compile_pattern(v)
    return _PATTERNS[v.space]


def _compile_pattern(v: Vocab) -> re.Pattern[str]:
    adjectives, nouns = "|".join(v.adjectives), "|".join(v.nouns)
    edge = r"(?<![A-Za-z0-9])"
    return re.compile(
        rf"{edge}(?P<model>(?:{adjectives})-(?:{nouns})-\d)(?![0-9])"
        rf"|{edge}(?P<package>(?:{nouns}){v.package_suffix}\d)(?![0-9])"
        rf"|(?<![A-Za-z0-9])(?P<instance>{v.instance_prefix})(?=-[a-z]{{4}}-[0-9a-f]{{8}})"
        rf"|(?<![A-Za-z])(?P<case>{v.case_prefix}[0-9a-f]{{6}})(?![0-9a-f])"
        rf"|(?<=data/)(?P<prefix>{v.file_prefix})(?=_)"
    )


def _word(rng: random.Random, low: int, high: int) -> str:
    """A random lowercase word of `low`..`high` letters that is no seed space's adjective or noun."""
    while True:
        word = "".join(rng.choice(LETTERS) for _ in range(rng.randint(low, high)))
        if word not in _RESERVED:
            return word


def fresh_identifier(kind: str, rng: random.Random) -> str:
    """A random identifier of `kind`: model `w-w-d`, package `wwd`, case 6 hex, case and instance prefixes `ll`,
    file prefix `w`."""
    if kind == "model":
        return f"{_word(rng, 3, 7)}-{_word(rng, 3, 7)}-{rng.randint(2, 9)}"
    if kind == "package":
        return f"{_word(rng, 3, 7)}{_word(rng, 2, 4)}{rng.randint(1, 9)}"
    if kind == "case":
        return "".join(rng.choice(HEX) for _ in range(6))
    if kind in ("instance", "case_prefix"):
        return _word(rng, 2, 2)
    if kind == "prefix":
        return _word(rng, 3, 5)
    raise ValueError(f"unknown identifier kind {kind!r}; valid: model, package, case, case_prefix, instance, prefix")


class Renamer:
    """Maps each practice identifier to a random one, the same within this renamer (one seed = one mapping).

    The mapping of an identifier depends only on (`seed`, kind, original), so every row of a sequence renamed
    with the same seed agrees, whatever order the rows come in."""

    def __init__(self, seed: int, v: Vocab = PRACTICE) -> None:
        self.seed = seed
        self.pattern = identifier_pattern(v)
        self.mapping: dict[tuple[str, str], str] = {}

    def _map(self, kind: str, original: str) -> str:
        key = (kind, original)
        if key not in self.mapping:
            self.mapping[key] = fresh_identifier(kind, random.Random(derive_seed(self.seed, "rename", *key)))
        return self.mapping[key]

    def _replace(self, match: re.Match[str]) -> str:
        kind, text = match.lastgroup or "", match.group(0)
        if kind == "case":  # one shared prefix per sequence, like the spaces' own `case_prefix`
            return self._map("case_prefix", text[:-6]) + self._map("case", text[-6:])
        return self._map(kind, text)

    def __call__(self, text: str) -> str:
        """`text` with every identifier replaced."""
        return self.pattern.sub(self._replace, text)


def renamed_row(row: SftRow, renamer: Callable[[str], str]) -> SftRow:
    """A copy of SftRow `row` with `renamer` applied to every message and the target."""
    messages = [m.model_copy(update={"content": renamer(m.content)}) for m in row.messages]
    return row.model_copy(update={"messages": messages, "target": renamer(row.target)})
