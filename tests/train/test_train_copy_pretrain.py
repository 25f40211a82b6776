"""Copy pretraining of the tiny model: sequence construction, config validation, a real (short) run."""

from __future__ import annotations

import random
import re

import pytest
from pydantic import ValidationError

from bat.config.model import CopyPretrainConfig, TinyModelConfig
from bat.policy.copy_pretrain import copy_pretrain, copy_sequence, ordinary_tokens


def test_masked_ids_repeat_an_earlier_span():
    rng = random.Random(3)
    for length in (16, 64, 257):
        ids, mask = copy_sequence(rng, list(range(10, 60)), length)
        assert len(ids) == len(mask) == length and sum(mask) >= 3
        start = mask.index(1) - 1  # first id of the repeat (unmasked)
        span = mask.count(1) + 1
        assert ids[start : start + span] in [ids[i : i + span] for i in range(start)], (
            "the masked ids copy an earlier span"
        )


def test_config_rejects_stages_longer_than_the_model():
    with pytest.raises(ValidationError, match="exceeds max_positions"):
        TinyModelConfig(max_positions=128, copy_pretrain={"stages": [{"steps": 1, "seq_len": 256}]})
    with pytest.raises(ValidationError, match="steps"):
        CopyPretrainConfig(stages=[{"vocab": 10}])
    assert CopyPretrainConfig(stages=[{"steps": 2}, {"steps": 3, "vocab": 64}]).steps == 5
    with pytest.raises(ValidationError, match="at least steps"):
        CopyPretrainConfig(stages=[{"steps": 10, "until_loss": 1.0, "max_steps": 5}])
    with pytest.raises(ValidationError, match="set until_loss"):
        CopyPretrainConfig(stages=[{"steps": 10, "max_steps": 50}])
    assert CopyPretrainConfig(stages=[{"steps": 10, "until_loss": 1.0}]).stages[0].step_bound == 30


def test_short_run_lowers_the_copy_loss_and_reports(tiny_dir):
    from bat.policy.loader import load_policy

    policy = load_policy(tiny_dir)
    tokens = ordinary_tokens(policy.tokenizer)
    special = set(policy.tokenizer.all_special_ids) | set(policy.tokenizer.get_added_vocab().values())
    assert tokens[:256] == sorted(tokens)[:256] and not special & set(tokens)
    seen: list[dict] = []
    cfg = CopyPretrainConfig(stages=[{"steps": 60, "vocab": 40, "seq_len": 32}], batch=16, lr=3e-3, log_every=20)
    summary = copy_pretrain(policy.model, tokens, cfg, seed=1, progress=seen.append)
    assert [s["steps"] for s in seen] == [20, 40, 60] and seen[0]["vocab"] == 40
    assert summary["steps"] == 60 and summary["loss"] < summary["first_loss"]


def test_text_sequences_insert_one_name_and_mask_its_repeats():
    from bat.policy.copy_pretrain import text_copy_sequence

    rng = random.Random(5)
    stream = list(range(1000, 1400))
    for _ in range(20):
        ids, mask = text_copy_sequence(rng, stream, list(range(10, 40)), 64)
        assert len(ids) == len(mask) == 64
        inserted = [i for i in ids if i < 1000]
        assert inserted, "the name is in the window"
        masked = [ids[k] for k, m in enumerate(mask) if m]
        assert all(i < 1000 for i in masked), "only name ids are scored"
    with pytest.raises(ValueError, match="needs the tokenized corpus"):
        copy_pretrain(None, [1, 2], CopyPretrainConfig(stages=[{"kind": "text", "steps": 1}]), seed=1)


def test_identifier_names_are_tokenized_random_identifiers(tiny_dir):
    from bat.benchmark.vocab import HELDOUT
    from bat.policy.copy_pretrain import identifier_ids, text_copy_sequence
    from bat.policy.loader import load_tokenizer

    tok = load_tokenizer(tiny_dir)
    draw = identifier_ids(tok)
    rng = random.Random(2)
    names = [tok.decode(draw(rng)).strip() for _ in range(40)]
    assert all(re.fullmatch(r"[a-z]{3,7}-[a-z]{3,7}-[2-9]|[a-z]{5,11}[1-9]|[a-z]{2}[0-9a-f]{6}", n) for n in names), (
        names
    )
    assert not {w for n in names for w in re.split(r"[-0-9]+", n)} & {*HELDOUT.adjectives, *HELDOUT.nouns}
    ids, mask = text_copy_sequence(rng, list(range(300, 700)), [], 128, draw)
    assert len(ids) == 128 and sum(mask) > 0
    with pytest.raises(ValueError, match="needs `name_ids`"):
        copy_pretrain(
            None, [1, 2], CopyPretrainConfig(stages=[{"kind": "identifier", "steps": 1}]), seed=1, stream=[1, 2, 3]
        )


def test_until_loss_stage_runs_past_steps_to_its_target_or_its_bound(tiny_dir, capsys):
    """A phase-change stage: at least `steps`, then on until the recent copy loss reaches the target."""
    from bat.policy.loader import load_policy

    policy = load_policy(tiny_dir)
    tokens = ordinary_tokens(policy.tokenizer)
    easy = {"steps": 10, "vocab": 8, "seq_len": 32, "until_loss": 50.0, "max_steps": 40}
    cfg = CopyPretrainConfig(stages=[easy], batch=8, lr=3e-3, log_every=5)
    summary = copy_pretrain(policy.model, tokens, cfg, seed=1)
    assert summary["steps"] == 10 and summary["stages_short"] == 0, "a met target ends the stage at its steps"
    unreachable = {**easy, "until_loss": 1e-6, "max_steps": 25}
    cfg = CopyPretrainConfig(stages=[unreachable, {"steps": 5, "vocab": 8, "seq_len": 32}], batch=8, log_every=5)
    seen: list[dict] = []
    summary = copy_pretrain(policy.model, tokens, cfg, seed=1, progress=seen.append)
    assert summary["steps"] == 30 and summary["stages_short"] == 1
    assert [s["steps"] for s in seen] == [5, 10, 15, 20, 25, 30]
    assert "stage 1 reached max_steps 25" in capsys.readouterr().out
