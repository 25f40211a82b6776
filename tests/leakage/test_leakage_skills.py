"""The preflight scans a bank version's stage skills file (`skills.json`, written by the LLM skill writer) like any
other bank text: a rewritten skill that copies held-out content rejects the version."""

from __future__ import annotations

import json

import pytest
from leakage_fixtures import HELDOUT_QUESTION, PARAPHRASED_BRIEF, SKILL

from bat.bank.skills import write_skills_file
from bat.config.root import BatConfig
from bat.leakage import LeakageRejected, is_admitted, read_report, save_index
from bat.leakage.phase import run_scan
from bat.phase.context import PhaseContext
from bat.state.bank_layout import BankVersionLayout
from bat.state.layout import RunLayout


@pytest.fixture
def ctx(tmp_path, index) -> PhaseContext:
    layout = RunLayout(tmp_path / "state" / "run").ensure()
    save_index(index, layout.fingerprint_index)
    return PhaseContext(config=BatConfig(), layout=layout, round=0, phase="scan")


def _with_skill(ctx: PhaseContext, make_bank, text: str):
    bank = make_bank(1, root=ctx.layout.bank_root)
    config = BatConfig.model_validate({"bank": {"skills": {"S3": text}}})
    assert write_skills_file(BankVersionLayout(bank).skills, config)
    return bank


def test_clean_rewritten_skills_are_scanned_and_admitted(ctx, make_bank):
    bank = _with_skill(ctx, make_bank, SKILL)
    run_scan(ctx)
    assert is_admitted(bank)
    report = read_report(bank)
    assert (
        report.files_scanned == 8 and report.rows_scanned == 1 + 2 + 2 + 1 + 1 + 1 + 1
    )  # the fixture's rows + skills.json
    assert json.loads((bank / "skills.json").read_text())["stages"]["S3"] == {"text": SKILL, "source": "rewritten"}


@pytest.mark.parametrize(
    ("leak", "kind"),
    [
        (" Reuse the layout of orion-det-0042.", "identifier"),
        (" " + HELDOUT_QUESTION, "text_ngram"),
        (" " + PARAPHRASED_BRIEF, None),
    ],
)
def test_a_skill_copying_heldout_content_rejects_the_version(ctx, make_bank, leak, kind):
    bank = _with_skill(ctx, make_bank, SKILL + leak)
    with pytest.raises(LeakageRejected):
        run_scan(ctx)
    assert not is_admitted(bank) and ctx.layout.newest_admitted_bank() is None
    report = read_report(bank)
    assert report.verdict == "rejected" and report.rows_flagged == 1
    assert [row.file for row in report.findings] == ["skills.json"]
    if kind is not None:
        assert report.hits_by_kind[kind] >= 1
