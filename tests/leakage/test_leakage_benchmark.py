"""Against the real built-in benchmark: its held-out export builds the index; practice workspaces pass,
held-out workspaces (ids, data paths, brief paragraphs, VQA questions) are rejected."""

from __future__ import annotations

import pytest

from bat.benchmark import suite
from bat.benchmark.instance import materialize
from bat.benchmark.secret import HeldoutSecret
from bat.config.root import BatConfig
from bat.leakage import Scanner, build_index, collect_heldout_entries, scan_bank_dir

TRACKS = ("detection", "vqa")
SECRET = HeldoutSecret.from_text("tests")


@pytest.fixture(scope="module")
def cfg() -> BatConfig:
    return BatConfig()


@pytest.fixture(scope="module")
def scanner(cfg) -> Scanner:
    entries = collect_heldout_entries(cfg, SECRET)
    assert {e.kind for e in entries} == {"identifier", "path", "answer", "text", "field"}
    return Scanner(build_index(entries, cfg.leakage))


def test_practice_workspaces_are_admitted(tmp_path, cfg, scanner):
    bank = tmp_path / "v0001"
    for track in TRACKS:
        for i in range(2):
            inst = suite.practice_instance(track, suite.practice_seed(track, i, cfg), cfg)
            materialize(inst, bank / "states" / f"{track}-{i}" / "files", tmp_path / "grader" / f"{track}-{i}")
    report = scan_bank_dir(bank, scanner)
    assert report.verdict == "admitted", [(r.file, r.findings[:2]) for r in report.findings[:3]]
    assert report.rows_scanned > 10
    assert report.similarity.rows_with_text > 0
    assert report.similarity.quantiles["max"] < scanner.config.jaccard_threshold


def test_heldout_workspaces_are_rejected(tmp_path, cfg, scanner):
    bank = tmp_path / "v0001"
    runs = [run for run in suite.heldout_suite(cfg, "final", secret=SECRET) if run.track in TRACKS][:2]
    for run in runs:
        materialize(suite.suite_instance(run, cfg), bank / "states" / run.run_id / "files", tmp_path / "g" / run.run_id)
    report = scan_bank_dir(bank, scanner)
    assert report.verdict == "rejected"
    assert report.hits_by_kind["identifier"] > 0
    assert report.hits_by_kind["path"] > 0
    assert report.hits_by_kind["text_ngram"] > 0
    readme_rows = [row for row in report.findings if row.file.endswith("task/README.md")]
    assert len(readme_rows) == len(runs)


def test_short_heldout_question_and_answer_in_a_row(scanner):
    row = {"prompt": [{"role": "user", "content": "Q: How many lesions are visible? Answer from the image."}]}
    assert {f.kind for f in scanner.scan_row(row).findings} == {"text_ngram"}
    practice = {"prompt": [{"role": "user", "content": "Count the bright spots in this image."}]}
    assert scanner.scan_row(practice).findings == []


def test_ensure_index_builds_reuses_and_follows_the_heldout_suite(tmp_path, cfg):
    from bat.leakage import ensure_index, export_index
    from bat.phase.guard import heldout_guard
    from bat.state.layout import RunLayout

    layout = RunLayout(tmp_path / "run")
    first = export_index(layout, cfg)
    meta = layout.fingerprint_index / "INDEX.json"
    assert first.origin["source"] == "bat.benchmark.fingerprint_entries"
    with heldout_guard(layout, "scan"):  # a training phase loads the exported index without the held-out secret
        assert ensure_index(layout, cfg).digest == first.digest
    stamp = meta.stat().st_mtime_ns
    again = export_index(layout, cfg)
    assert again.digest == first.digest and meta.stat().st_mtime_ns == stamp
    moved = BatConfig.model_validate({"benchmark": {"heldout_seed": cfg.benchmark.heldout_seed + 1}})
    rebuilt = export_index(layout, moved)
    assert rebuilt.digest != first.digest
    assert rebuilt.origin != first.origin
    assert "heldout_secret" in first.origin and layout.heldout_secret.exists()
    key = layout.heldout_secret.read_text().strip()
    assert (
        key not in (layout.fingerprint_index / "INDEX.json").read_text()
    )  # the index names the secret, never holds it
    layout.heldout_secret.unlink()  # another secret is another held-out suite: the index follows it
    other = export_index(layout, moved)
    assert other.digest != rebuilt.digest and other.origin["heldout_secret"] != rebuilt.origin["heldout_secret"]


def test_every_exported_brief_is_caught_after_word_substitutions(scanner):
    """Replace every 6th word of each held-out text (>= min_text_words) and drop its punctuation."""
    texts = [e.value for e in scanner.index.entries if e.kind == "text" and len(e.value.split()) >= 12]
    assert texts
    for text in texts:
        words = text.replace(";", "").replace(",", "").split()
        altered = " ".join("zebra" if i % 6 == 5 else w for i, w in enumerate(words))
        kinds = {f.kind for f in scanner.scan_row({"brief": altered}).findings}
        assert kinds == {"near_duplicate"}, altered  # no verbatim 8-word run survives the substitutions


def test_a_guarded_phase_cannot_export_the_index(tmp_path, cfg):
    """The export reads the held-out secret, which only the run's start (not a training phase) may do."""
    from bat.benchmark.secret import run_secret
    from bat.leakage import ensure_index
    from bat.phase.guard import HeldoutAccessError, heldout_guard
    from bat.state.layout import RunLayout

    layout = RunLayout(tmp_path / "run").ensure()
    run_secret(layout)
    with pytest.raises(HeldoutAccessError, match="SECRET"), heldout_guard(layout, "synthesize"):
        ensure_index(layout, cfg)
