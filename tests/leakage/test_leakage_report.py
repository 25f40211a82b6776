"""The measured audit in leakage.json: similarity histogram and quantiles, verdict files."""

from __future__ import annotations

import json

from bat.config.leakage import LeakageConfig
from bat.leakage.findings import Finding
from bat.leakage.report import ReportBuilder, is_admitted, read_report, similarity_audit, write_verdict
from bat.leakage.scanner import RowScan


def test_similarity_histogram_and_quantiles():
    audit = similarity_audit([0.05, 0.35, 0.95, 1.0], LeakageConfig())
    assert [b.count for b in audit.histogram] == [1, 0, 0, 1, 0, 0, 0, 0, 0, 2]
    assert (audit.histogram[0].lo, audit.histogram[-1].hi) == (0.0, 1.0)
    assert audit.quantiles == {"p50": 0.65, "p90": 0.985, "p99": 0.9985, "max": 1.0}
    assert audit.rows_with_text == 4 and audit.rows_at_or_above_threshold == 3
    empty = similarity_audit([], LeakageConfig())
    assert empty.rows_with_text == 0 and empty.quantiles["max"] == 0.0


def test_builder_counts_rows_kinds_and_round_trips(tmp_path):
    builder = ReportBuilder(LeakageConfig())
    builder.add("a", "rl/rows.jsonl", 1, RowScan(max_similarity=0.02, texts_checked=2))
    hit = Finding(kind="identifier", location="prompt[0].content", matched="hx-1", source="s")
    builder.add("b", "rl/rows.jsonl", 2, RowScan(findings=[hit, hit], max_similarity=0.5, texts_checked=1))
    builder.add("c", "x.md", None, RowScan())
    report = builder.build("v0003", "sha256:abc", {"identifier": 1})
    assert (report.rows_scanned, report.rows_flagged, report.verdict) == (3, 1, "rejected")
    assert report.hits_by_kind["identifier"] == 2 and report.rows_by_kind["identifier"] == 1
    assert report.similarity.rows_with_text == 2
    write_verdict(tmp_path, report)
    assert read_report(tmp_path) == report
    assert json.loads((tmp_path / "REJECTED.json").read_text())["rows_flagged"] == 1
    assert not is_admitted(tmp_path)
