"""Identifier vocabularies of the two seed spaces: held-out and practice share no words, prefixes or phrasings.

Every identifier an instance exposes (instance id, case ids, data file names, model names, package names)
and the brief's phrasing come from its space's `Vocab`; disjointness is asserted at import.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Vocab:
    """Words and templates of one seed space."""

    space: str
    instance_prefix: str
    case_prefix: str
    file_prefix: str
    adjectives: tuple[str, ...]
    nouns: tuple[str, ...]
    package_suffix: str
    goal_phrases: tuple[str, ...]
    intro: str
    brief: str
    """Template of the instance paragraph ({intro} {goal} {n} {modality} {metric} {title})."""
    questions: dict[str, str]
    """VQA question wording per question type (count, presence, side)."""

    def model_name(self, rng: np.random.Generator, taken: set[str]) -> str:
        """A fresh `<adjective>-<noun>-<digit>` model name not in `taken` (added to it)."""
        for _ in range(1000):
            name = f"{rng.choice(self.adjectives)}-{rng.choice(self.nouns)}-{int(rng.integers(2, 10))}"
            if name not in taken:
                taken.add(name)
                return name
        raise RuntimeError(f"vocabulary of space {self.space!r} exhausted")

    def package_name(self, rng: np.random.Generator, taken: set[str]) -> str:
        """A fresh offline package name (`<noun><suffix>`) not in `taken` (added to it)."""
        for _ in range(1000):
            name = f"{rng.choice(self.nouns)}{self.package_suffix}{int(rng.integers(1, 10))}"
            if name not in taken:
                taken.add(name)
                return name
        raise RuntimeError(f"package vocabulary of space {self.space!r} exhausted")

    def case_id(self, rng: np.random.Generator, taken: set[str]) -> str:
        """A fresh case id `<prefix><6 hex>`."""
        while True:
            cid = f"{self.case_prefix}{int(rng.integers(0, 16**6)):06x}"
            if cid not in taken:
                taken.add(cid)
                return cid


HELDOUT = Vocab(
    space="heldout",
    instance_prefix="hx",
    case_prefix="hc",
    file_prefix="scan",
    adjectives=("amber", "basalt", "cobalt", "dusky", "ember", "fallow", "garnet", "hazel", "indigo", "jasper"),
    nouns=("lynx", "otter", "heron", "marten", "osprey", "vole", "stoat", "plover", "egret", "kestrel"),
    package_suffix="lib",
    goal_phrases=("Produce", "Deliver", "Compute"),
    intro="This study asks you to analyse the scans below.",
    brief="{intro} {goal} a result for each of the {n} {modality} scans (see data/ and task/spec.json); the {title} is "
    "graded by {metric}. The required result format is task/spec.json, key output.",
    questions={
        "count": "How many lesions are visible?",
        "presence": "Is any lesion visible?",
        "side": "On which side is the largest lesion?",
    },
)

PRACTICE = Vocab(
    space="practice",
    instance_prefix="px",
    case_prefix="pc",
    file_prefix="img",
    adjectives=("quartz", "russet", "sable", "tawny", "umber", "velvet", "wintry", "xenial", "yarrow", "zinc"),
    nouns=("wren", "badger", "ibis", "gecko", "ferret", "newt", "puffin", "tapir", "civet", "dingo"),
    package_suffix="kit",
    goal_phrases=("Create", "Generate", "Return"),
    intro="In this practice exercise you work through the images listed below.",
    brief="{intro} {goal} per-image outputs for all {n} images of modality {modality}; scoring uses {metric} "
    "for this {title} exercise. Follow the output section of task/spec.json exactly.",
    questions={
        "count": "Count the bright spots in this image.",
        "presence": "Does this image show a spot?",
        "side": "Which half holds the biggest spot?",
    },
)

SPACES = {"heldout": HELDOUT, "practice": PRACTICE}


def vocab(space: str) -> Vocab:
    """The vocabulary of `space`; raises listing the valid spaces."""
    if space not in SPACES:
        raise ValueError(f"unknown seed space {space!r}; valid: {sorted(SPACES)}")
    return SPACES[space]


def _assert_disjoint() -> None:
    a, b = HELDOUT, PRACTICE
    for field in ("adjectives", "nouns", "goal_phrases"):
        common = set(getattr(a, field)) & set(getattr(b, field))
        if common:
            raise AssertionError(f"held-out and practice {field} overlap: {sorted(common)}")
    if set(a.questions.values()) & set(b.questions.values()):
        raise AssertionError("held-out and practice VQA questions overlap")
    for field in ("instance_prefix", "case_prefix", "file_prefix", "package_suffix", "intro", "brief"):
        if getattr(a, field) == getattr(b, field):
            raise AssertionError(f"held-out and practice share {field} {getattr(a, field)!r}")


_assert_disjoint()
