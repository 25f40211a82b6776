"""Practice-episode text in the tokenizer corpus: deterministic, practice-only, and it shortens SFT-shaped text."""

from __future__ import annotations

import pytest

from bat.benchmark import TOOL_SPECS
from bat.policy.chat import render_messages
from bat.policy.corpus import tokenizer_corpus
from bat.policy.practice_text import practice_texts, tool_block
from bat.policy.tiny import train_tokenizer


@pytest.fixture(scope="module")
def texts():
    return practice_texts(0, tracks=["vqa", "report"])


def test_practice_texts_are_deterministic_and_seeded(texts):
    assert practice_texts(0, tracks=["vqa", "report"]) == texts
    assert practice_texts(1, tracks=["vqa", "report"]) != texts
    briefs = [t for t in texts if t.startswith("# Task ")]
    assert len(briefs) >= 4 and all(b.startswith("# Task px-") for b in briefs), "practice instances only"
    assert any("<tool_call>" in t for t in texts) and not any("bat-corpus-" in t for t in texts)


def test_no_heldout_identifier_reaches_the_corpus(texts):
    from bat.benchmark import HeldoutSecret, fingerprint_entries

    identifiers = {
        e["value"]
        for e in fingerprint_entries(secret=HeldoutSecret.from_text("tests"))
        if e["kind"] == "identifier" and len(e["value"]) >= 6
    }
    assert identifiers
    joined = "\n".join(texts)
    assert not [i for i in identifiers if i in joined]
    assert not any(t.startswith("# Task hx-") for t in texts)


def test_tool_block_is_what_the_chat_template_renders(tiny_dir):
    from bat.policy.loader import load_tokenizer

    rendered = render_messages(load_tokenizer(tiny_dir), [{"role": "user", "content": "hi"}], TOOL_SPECS)
    assert tool_block(TOOL_SPECS) in rendered


def test_unknown_track_lists_valid_ones():
    with pytest.raises(ValueError, match="valid: .*vqa"):
        practice_texts(0, tracks=["radiology"])


def test_practice_corpus_shortens_unseen_practice_text():
    held = practice_texts(99, tracks=["vqa"], agents=("expert",))
    base = train_tokenizer(tokenizer_corpus(seed=0, practice=False), 1024)
    with_practice = train_tokenizer(tokenizer_corpus(seed=0), 1024)

    def count(tok):
        return sum(len(tok(t, add_special_tokens=False)["input_ids"]) for t in held)

    assert count(with_practice) < 0.9 * count(base)
    for marker in ("<tool_call>", "</tool_call>"):
        assert len(with_practice(marker, add_special_tokens=False)["input_ids"]) == 1
