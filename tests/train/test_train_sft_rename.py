"""Identifier renaming in SFT: every practice identifier replaced, consistently per sequence, seeded, packing kept."""

from __future__ import annotations

import re

import pytest

from bat.benchmark.instance import generate_instance
from bat.benchmark.vocab import HELDOUT, PRACTICE
from bat.policy.rename import Renamer, fresh_identifier, identifier_pattern, renamed_row
from bat.train.common import batch_indices, batch_positions
from bat.train.sft_data import prepare_sft


@pytest.fixture(scope="module")
def instance_text():
    inst = generate_instance("classification", "practice", 3, n_cases=4)
    return inst, "\n".join(inst.files[p].decode() for p in ("task/README.md", "task/spec.json", "env/wheelhouse.txt"))


@pytest.fixture(scope="module")
def bank_rows(tmp_path_factory, bank_rows_of):
    """SFT rows of a real practice bank (one classification expert trajectory, in-process runtime)."""
    return bank_rows_of(tmp_path_factory.mktemp("bank") / "run", "classification")


def _identifiers(inst) -> set[str]:
    return {
        *inst.candidates,
        *inst.case_ids,
        inst.instance_id.split("-")[0],
        PRACTICE.file_prefix,
        *inst.files["env/wheelhouse.txt"].decode().split(),
    }


def test_every_practice_identifier_is_found_and_replaced(instance_text):
    inst, text = instance_text
    found = {m.group(0) for m in identifier_pattern().finditer(text)}
    assert {*inst.candidates, *inst.case_ids, *inst.files["env/wheelhouse.txt"].decode().split()} <= found
    renamed = Renamer(1)(text)
    assert not identifier_pattern().search(renamed), "no practice identifier is left"
    for name in [*inst.candidates, *inst.case_ids, inst.instance_id]:
        assert name not in renamed
    assert "data/img_" not in renamed and re.search(r"data/[a-z]{3,5}_[a-z]{2}[0-9a-f]{6}\.npy", renamed)
    # the surrounding text is untouched
    assert Renamer(1)("Use model zinc-newt-5.").startswith("Use model ") and "practice exercise" in renamed


def test_mapping_is_consistent_seeded_and_order_free(instance_text):
    inst, text = instance_text
    one = Renamer(7)
    first, again = one(text), one(text)
    assert first == again
    fresh = Renamer(7)
    lines = text.splitlines()
    assert "\n".join(fresh(line) for line in reversed(lines)) == "\n".join(reversed(first.splitlines())), (
        "the mapping of a name does not depend on the order rows are renamed in"
    )
    assert Renamer(8)(text) != first
    models = {new for (kind, _), new in one.mapping.items() if kind == "model"}
    assert len(models) == len(inst.candidates), "distinct names stay distinct"
    prefixes = {new for (kind, _), new in one.mapping.items() if kind == "case_prefix"}
    assert len(prefixes) == 1, "all cases of a sequence share one prefix, as in both seed spaces"


def test_generated_names_never_use_a_seed_space_word():
    import random

    words = {*HELDOUT.adjectives, *HELDOUT.nouns, *PRACTICE.adjectives, *PRACTICE.nouns}
    rng = random.Random(0)
    for kind in ("model", "package", "case", "case_prefix", "instance", "prefix"):
        for _ in range(300):
            name = fresh_identifier(kind, rng)
            assert not set(re.split(r"[-0-9]+", name)) & words
    assert re.fullmatch(r"[a-z]{3,7}-[a-z]{3,7}-[2-9]", fresh_identifier("model", rng))
    with pytest.raises(ValueError, match="valid: model, package"):
        fresh_identifier("colour", rng)


def test_renamed_bank_rows_still_pack_and_keep_their_targets(bank_rows, tiny_dir):
    from bat.policy.loader import load_tokenizer

    tok = load_tokenizer(tiny_dir)
    data = prepare_sft(bank_rows, [], tok, 100_000, tools=[], pack=True, rename=True)
    plain = prepare_sft(bank_rows, [], tok, 100_000, tools=[], pack=True)
    assert [e.ids for e in data.train] == [e.ids for e in plain.train], "the stored examples are the originals"
    for index, example in enumerate(data.train):
        visit = data.visit(example, 100 + index)
        assert visit is not example and visit.rows == example.rows and visit.group == example.group
        assert visit.ids != example.ids
        assert data.visit(example, 100 + index).ids == visit.ids, "one seed, one encoding"
        text = tok.decode(visit.ids)
        assert not identifier_pattern().search(text)
        assert not any(name in text for name in (*HELDOUT.adjectives, *HELDOUT.nouns))
    assert [e.ids for e in plain.validation(5)] == [e.ids for e in plain.val]
    renamed_rows = [renamed_row(r, Renamer(1)) for r in bank_rows]
    assert [r.row_id for r in renamed_rows] == [r.row_id for r in bank_rows]
    assert all(r.target != o.target for r, o in zip(renamed_rows, bank_rows) if identifier_pattern().search(o.target))


def test_batch_positions_carry_the_epoch_of_each_index():
    positions = batch_positions(5, 3, 6, seed=2)
    assert [i for _, i in positions] == batch_indices(5, 3, 6, seed=2)
    assert [e for e, _ in positions] == [0, 0, 1, 1, 1, 1]
