"""`bat bank scan` and `bat bench scan` from the command line (tiny sizes)."""

from __future__ import annotations

import json

from leakage_fixtures import plant_answer

from bat.cli.main import main
from bat.leakage import save_index
from bat.state.layout import RunLayout


def test_bank_scan_admits_then_rejects(tmp_path, index, make_bank, capsys):
    layout = RunLayout(tmp_path / "state" / "run").ensure()
    save_index(index, layout.fingerprint_index)
    make_bank(1, root=layout.bank_root)
    assert main(["bank", "scan", "--state", str(layout.root)]) == 0
    out = capsys.readouterr().out
    assert "v0001: admitted" in out and "near-duplicate audit" in out
    make_bank(2, mutate=plant_answer, root=layout.bank_root)
    assert main(["bank", "scan", "--state", str(layout.root)]) == 1
    out = capsys.readouterr().out
    assert "v0002: rejected" in out and "answer at target" in out
    assert json.loads((layout.bank(2) / "REJECTED.json").read_text())["hits_by_kind"] == {"answer": 1}
    assert layout.admitted_bank_versions() == [1]


def test_bank_scan_bad_version_is_usage_error(tmp_path, capsys):
    state = tmp_path / "state" / "run"
    assert main(["bank", "scan", "--state", str(state), "--version", "7"]) == 2
    assert "bank v0007 not found; versions on disk: []" in capsys.readouterr().out


def test_bench_scan_small(capsys):
    code = main(["bench", "scan", "--rows", "300", "--entries", "3000", "--texts", "50", "--naive-rows", "20"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "scanner (Aho-Corasick + MinHash)" in out and "naive per-pattern substring loop" in out
    assert "missed planted leaks: 0; clean rows flagged: 0" in out
    assert "extrapolated to 300 rows" in out
