"""SFT loss masks through the policy team's tokenizer and chat template: exactly the target is trained."""

import pytest

from bat.bank.sft import TokenLengthMeter, tokenize_sft_row
from bat.bank.synthesize import synthesize
from bat.benchmark import TOOL_SPECS
from bat.config import load_config
from bat.policy.chat import IM_END
from bat.state.layout import RunLayout


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    from bat.policy.corpus import tokenizer_corpus
    from bat.policy.tiny import train_tokenizer

    path = tmp_path_factory.mktemp("tok")
    train_tokenizer(tokenizer_corpus()[:400], 600).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def token_bank(tokenizer_dir, tmp_path_factory):
    cfg = load_config(
        None,
        [
            "bank.tracks=[vqa]",
            "bank.tasks_per_track=1",
            "bank.e2e_per_track=0",
            "bank.outcomes=[success]",
            "benchmark.runtime=inprocess",
            "leakage.enabled=false",
            f"bank.sft_tokenizer={tokenizer_dir}",
            "bank.sft_max_length=4000",
        ],
    )
    bank, _ = synthesize(cfg, RunLayout(tmp_path_factory.mktemp("b") / "run"))
    return bank


def test_mask_covers_exactly_the_target(token_bank, tokenizer_dir):
    from bat.policy.loader import load_tokenizer

    tok = load_tokenizer(tokenizer_dir)
    rows = token_bank.sft_rows("train") + token_bank.sft_rows("validation")
    assert rows and all(r.length_unit == "tokens" for r in rows)
    for row in rows:
        ids, mask = tokenize_sft_row(row, tok, TOOL_SPECS)
        assert len(ids) == len(mask) == row.length
        on = [i for i, m in enumerate(mask) if m]
        assert on == list(range(on[0], on[-1] + 1)), "target tokens are one contiguous span"
        assert tok.decode([ids[i] for i in on]) == row.target + IM_END
        context = tok.decode(ids[: on[0]])
        assert row.messages[-1].content in context and context.endswith("<|im_start|>assistant\n")


def test_overlong_rows_counted_by_token_length(token_bank, tokenizer_dir):
    rejected = token_bank.sft_rejected()
    assert rejected["unit"] == "tokens" and rejected["limit"] == 4000
    assert rejected["overlong"] > 0 and rejected["kept"] > 0
    assert rejected["kept"] == len(token_bank.sft_rows("train")) + len(token_bank.sft_rows("validation"))
    assert max(r.length for r in token_bank.sft_rows("train")) <= 4000


def test_token_meter_matches_encoding(tokenizer_dir):
    from bat.policy.loader import load_tokenizer
    from bat.schemas.bank import ChatMessage

    tok = load_tokenizer(tokenizer_dir)
    meter = TokenLengthMeter(tok, TOOL_SPECS)
    short = meter.measure([ChatMessage(role="system", content="s"), ChatMessage(role="user", content="u")], "a")
    longer = meter.measure([ChatMessage(role="system", content="s"), ChatMessage(role="user", content="u " * 50)], "a")
    assert longer > short > 0
