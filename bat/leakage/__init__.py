"""Leakage preflight: a held-out fingerprint index and a scanner that admits or rejects a whole bank version.

Public API (knobs in `bat.config.leakage.LeakageConfig`, section `leakage`):

Fingerprint index (published by the held-out side, read by the training side):

* `Entry(kind, value, source="")` with `kind` in `KINDS` = ("identifier", "path", "answer", "text", "field"):
  identifier = held-out task/case ids, model names, file names; path = held-out file paths;
  answer = answers/labels; text = held-out briefs/questions/reports (n-grams + MinHash);
  field = eval-derived field names (keys/values only evaluation produces). Identifier/answer/path/field
  values shorter than `min_pattern_chars` match only a whole string value, longer ones any substring on
  word boundaries.
* `build_index(entries: Iterable[Entry | tuple[str, str] | dict], config: LeakageConfig) -> FingerprintIndex`
  (an unknown kind raises listing `KINDS`).
* `save_index(index, path) -> Path` / `load_index(path, config) -> FingerprintIndex`: a directory
  (`entries.jsonl` + `INDEX.json` with counts and `digest`) written with `atomic_dir`.
* `collect_heldout_entries(config: BatConfig, secret: HeldoutSecret) -> list[Entry]`: the held-out suite's fingerprints from
  `bat.benchmark.fingerprint_entries(config)`. Training code never opens held-out files; it only reads the
  exported index at `RunLayout.fingerprint_index` (`state/<run>/fingerprints/`) or `leakage.index_path`.

Scanner:

* `Scanner(index)` (settings = the index's LeakageConfig); `.scan_row(row, rl_row=False) -> RowScan`
  (`.findings: list[Finding]`, `.max_similarity`, `.texts_checked`): walks nested
  dicts / lists / pydantic models, every key and every string value. Kinds of finding (`FINDING_KINDS`):
  identifier, path, answer (Aho-Corasick, word-boundary exact matches, case-insensitive), text_ngram
  (a verbatim run of `exact_ngram_words` words of a held-out text), near_duplicate (MinHash LSH over word
  shingles, verified by exact shingle Jaccard >= `jaccard_threshold`), eval_field (eval-derived keys/values),
  forbidden_field (assistant targets / transcripts / answers in RL rows), credential (token-looking strings;
  never echoed in reports), machine_path (absolute paths outside `allowed_abs_path_prefixes`).
* `scan_bank_dir(bank_dir, scanner) -> LeakageReport`: every file of a bank version: each JSONL line is a
  row (`rl/*.jsonl` rows are RL rows), a `.json` file is one parsed row, other UTF-8 files are one row each,
  binary files contribute their relative path only; every relative path is scanned too. `leakage.json`,
  `ADMITTED`, `REJECTED.json` are not scanned. Only string keys/values are checked (numbers are not).
* `LeakageReport` (pydantic, `schema_version`): verdict "admitted" | "rejected", rows/files scanned, hits
  by kind, per-row findings, and the measured audit: distribution of each row's highest near-duplicate
  Jaccard against held-out texts (histogram + quantiles).
* `write_verdict(bank_dir, report) -> Path`: writes `leakage.json`; then `ADMITTED` (last) when clean,
  else removes any stale `ADMITTED` and writes `REJECTED.json`. `is_admitted(bank_dir) -> bool`,
  `read_report(bank_dir) -> LeakageReport | None`.
* `scan_and_admit(layout, version, config: BatConfig, index=None) -> LeakageReport`: the whole preflight
  for one version (`ensure_index(layout, config)` loads the index, exported at run start by
  `export_index(layout, config)`, which builds + saves it from the benchmark under the run's held-out secret);
  a version already scanned with the same index, files (content digest) and settings is not rescanned.
  `LeakageRejected(report, path)` is raised by the phase when rejected and `leakage.fail_on_reject`.

Phase: `bat.leakage.phase:run_scan` (`(ctx) -> PhaseResult`, phase "scan"): scans the
newest complete bank version (with MANIFEST.json) under `ctx.layout.bank_root`, writes `leakage.json` and
`ADMITTED` (clean) or `REJECTED.json` in that version directory; a rejected version raises `LeakageRejected`
(admission stops; rounds keep pinning the previous admitted version).
CLI helper for `bat bank scan`: `bat.cli.leakage_scan.add_scan_arguments(parser)` + `bat.cli.leakage_scan.cli_scan(args) -> int`.
Benchmark: `bat bench scan` (bat/perf/scan.py).
"""

from bat.leakage.bankscan import scan_bank_dir
from bat.leakage.findings import FINDING_KINDS, Finding, RowFindings
from bat.leakage.heldout import collect_heldout_entries
from bat.leakage.index import KINDS, Entry, FingerprintIndex, build_index, load_index, save_index
from bat.leakage.preflight import LeakageRejected, ensure_index, export_index, scan_and_admit
from bat.leakage.report import LeakageReport, is_admitted, read_report, write_verdict
from bat.leakage.scanner import RowScan, Scanner

__all__ = [
    "FINDING_KINDS",
    "KINDS",
    "Entry",
    "Finding",
    "FingerprintIndex",
    "LeakageRejected",
    "LeakageReport",
    "RowFindings",
    "RowScan",
    "Scanner",
    "build_index",
    "collect_heldout_entries",
    "ensure_index",
    "export_index",
    "is_admitted",
    "load_index",
    "read_report",
    "save_index",
    "scan_and_admit",
    "scan_bank_dir",
    "write_verdict",
]
