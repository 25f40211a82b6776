"""Whole bank versions: a clean version is admitted; each planted leak rejects it and stops admission."""

from __future__ import annotations

import json

import pytest
from leakage_fixtures import PLANTS, plant_answer, plant_file_name, plant_identifier

from bat.config.root import BatConfig
from bat.leakage import LeakageRejected, Scanner, is_admitted, read_report, save_index, scan_bank_dir
from bat.leakage.phase import run_scan
from bat.phase.context import PhaseContext
from bat.state.jsonl import CorruptRecordError
from bat.state.layout import RunLayout


@pytest.fixture
def ctx(tmp_path, index) -> PhaseContext:
    layout = RunLayout(tmp_path / "state" / "run").ensure()
    save_index(index, layout.fingerprint_index)
    return PhaseContext(config=BatConfig(), layout=layout, round=0, phase="scan")


def test_clean_bank_is_admitted(ctx, make_bank):
    bank = make_bank(1, root=ctx.layout.bank_root)
    result = run_scan(ctx)
    assert is_admitted(bank)
    assert ctx.layout.newest_admitted_bank() == 1
    report = read_report(bank)
    assert report.verdict == "admitted" and report.rows_flagged == 0
    assert report.rows_scanned == 1 + 2 + 2 + 1 + 1 + 1  # tasks, rl rows, sft rows, rl/index, README, MANIFEST
    assert report.binary_files == 1
    assert report.similarity.rows_with_text >= 5
    assert report.manifest_digest.startswith("sha256:")
    assert result.counts["admitted"] == 1 and result.counts["rows_flagged"] == 0
    assert result.outputs == [bank / "leakage.json", bank / "ADMITTED"]
    assert not (bank / "REJECTED.json").exists()


@pytest.mark.parametrize("kind", sorted(PLANTS))
def test_each_planted_leak_rejects_the_version(ctx, make_bank, kind):
    bank = make_bank(1, mutate=PLANTS[kind], root=ctx.layout.bank_root)
    with pytest.raises(LeakageRejected, match=f"'{kind}': 1"):
        run_scan(ctx)
    assert not (bank / "ADMITTED").exists()
    assert ctx.layout.newest_admitted_bank() is None
    report = read_report(bank)
    assert report.verdict == "rejected"
    assert report.rows_flagged == 1
    assert report.hits_by_kind[kind] == 1
    assert [f.kind for row in report.findings for f in row.findings] == [kind]
    rejected = json.loads((bank / "REJECTED.json").read_text())
    assert rejected["hits_by_kind"] == {kind: 1}


def test_leaky_file_name_is_reported_without_counting_a_row(index, make_bank):
    bank = make_bank(1, mutate=plant_file_name)
    report = scan_bank_dir(bank, Scanner(index))
    assert report.verdict == "rejected"
    by_file = {row.file: row for row in report.findings}
    assert set(by_file) == {"MANIFEST.json", "states/st-0001/files/data/ORN_CASE_7781.npy"}  # listed there too
    assert by_file["states/st-0001/files/data/ORN_CASE_7781.npy"].line is None
    assert report.binary_files == 2
    assert report.rows_scanned == 8


def test_failed_rescan_withdraws_a_stale_admission(ctx, make_bank):
    """Files edited after admission (content digest changes) are rescanned; a leak withdraws ADMITTED."""
    bank = make_bank(1, root=ctx.layout.bank_root)
    run_scan(ctx)
    assert is_admitted(bank)
    rows = bank / "rl/rows.jsonl"
    lines = rows.read_text().splitlines()
    leaked = json.loads(lines[0])
    leaked["skill"] += " See orion-det-0042."
    rows.write_text("\n".join([json.dumps(leaked)] + lines[1:]) + "\n")
    with pytest.raises(LeakageRejected):
        run_scan(ctx)
    assert not is_admitted(bank)
    assert ctx.layout.admitted_bank_versions() == []


def test_newest_version_is_scanned_and_rescans_are_noops(ctx, make_bank):
    make_bank(1, mutate=plant_identifier, root=ctx.layout.bank_root)
    newest = make_bank(2, root=ctx.layout.bank_root)
    first = run_scan(ctx)
    assert first.counts["bank_version"] == 2
    stamp = read_report(newest).scanned_at
    (newest / "leakage.json").touch()
    second = run_scan(ctx)
    assert read_report(newest).scanned_at == stamp
    assert second.counts == first.counts
    assert ctx.layout.admitted_bank_versions() == [2]


def test_report_only_mode_records_rejection_without_raising(ctx, make_bank):
    config = BatConfig.model_validate({"leakage": {"fail_on_reject": False}})
    ctx = PhaseContext(config=config, layout=ctx.layout, round=0, phase="scan")
    bank = make_bank(1, mutate=plant_answer, root=ctx.layout.bank_root)
    result = run_scan(ctx)
    assert result.counts["admitted"] == 0
    assert result.outputs == [bank / "leakage.json", bank / "REJECTED.json"]
    assert not is_admitted(bank)


def test_disabled_preflight_admits_and_says_so(ctx, make_bank):
    config = BatConfig.model_validate({"leakage": {"enabled": False}})
    ctx = PhaseContext(config=config, layout=ctx.layout, round=0, phase="scan")
    bank = make_bank(1, mutate=plant_answer, root=ctx.layout.bank_root)
    run_scan(ctx)
    report = read_report(bank)
    assert report.scanned is False and report.verdict == "admitted"
    assert is_admitted(bank)


def test_incomplete_or_missing_versions_are_errors(ctx, make_bank):
    with pytest.raises(FileNotFoundError, match="no complete bank version"):
        run_scan(ctx)
    bank = make_bank(1, root=ctx.layout.bank_root)
    (bank / "MANIFEST.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"versions on disk: \[1\]"):
        run_scan(ctx)


def test_corrupt_jsonl_line_fails_the_scan(index, make_bank):
    bank = make_bank(1)
    with open(bank / "sft/train.jsonl", "a", encoding="utf-8") as handle:
        handle.write('{"row_id": "broken"\n')
    with pytest.raises(CorruptRecordError, match="train.jsonl:3"):
        scan_bank_dir(bank, Scanner(index))


def test_missing_index_without_export_is_explained(tmp_path, make_bank):
    config = BatConfig.model_validate({"leakage": {"index_path": str(tmp_path / "nowhere")}})
    layout = RunLayout(tmp_path / "state" / "run").ensure()
    make_bank(1, root=layout.bank_root)
    ctx = PhaseContext(config=config, layout=layout, round=0, phase="scan")
    with pytest.raises(FileNotFoundError, match="has no INDEX.json"):
        run_scan(ctx)


def test_phase_table_resolves_the_scan_phase():
    from bat.orchestrate.graph import PHASES, load_phase_fn

    assert load_phase_fn(PHASES["scan"].target) is run_scan


def test_report_lists_at_most_max_report_rows(make_bank):
    from leakage_fixtures import HELDOUT_ENTRIES

    from bat.config.leakage import LeakageConfig
    from bat.leakage import build_index

    def leak_everywhere(files):
        for row in files["sft/train.jsonl"] + files["rl/rows.jsonl"]:
            row["note"] = "see orion-det-0042"

    index = build_index(HELDOUT_ENTRIES, LeakageConfig(max_report_rows=2, max_findings_per_row=1))
    report = scan_bank_dir(make_bank(1, mutate=leak_everywhere), Scanner(index))
    assert report.verdict == "rejected"
    assert report.rows_flagged == 4 and report.rows_omitted == 2 and len(report.findings) == 2
