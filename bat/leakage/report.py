"""The leakage report of one bank version (leakage.json) and the admission verdict (ADMITTED marker).

Besides the per-row findings, the report carries the measured audit the paper lists as missing: rows
scanned, hits by kind, and the distribution of each row's highest near-duplicate Jaccard against held-out
texts (histogram + quantiles). `write_verdict` writes leakage.json first and ADMITTED last, only when clean.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from bat.config.leakage import LeakageConfig
from bat.leakage.findings import FINDING_KINDS, RowFindings
from bat.leakage.scanner import RowScan
from bat.state.atomic import atomic_write_json, read_json
from bat.state.bank_layout import BankVersionLayout

REPORT_SCHEMA_VERSION = 1
HISTOGRAM_EDGES = tuple(round(0.1 * i, 1) for i in range(11))


class HistogramBin(BaseModel):
    """Rows whose highest similarity lies in [lo, hi) (the last bin includes 1.0)."""

    model_config = ConfigDict(extra="forbid")

    lo: float
    hi: float
    count: int = Field(ge=0)


class SimilarityAudit(BaseModel):
    """Distribution of the per-row highest Jaccard against held-out text windows.

    Similarities below `audit_floor` are retrieved only by chance by the LSH and mostly read as 0.
    """

    model_config = ConfigDict(extra="forbid")

    shingle_size: int
    jaccard_threshold: float
    audit_floor: float
    rows_with_text: int
    """Rows with at least one string of `min_text_words` words or more."""
    histogram: list[HistogramBin]
    """Bins of width 0.1 over [0, 1] of the per-row maximum."""
    quantiles: dict[str, float]
    """p50 / p90 / p99 / max of the per-row maximum (0 when no row had text)."""
    rows_at_or_above_threshold: int


class LeakageReport(BaseModel):
    """leakage.json: verdict, counts, audit and per-row findings of one bank version scan."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = REPORT_SCHEMA_VERSION
    bank_version: str
    """Name of the scanned version directory (e.g. `v0003`); never an absolute path."""
    manifest_digest: str = ""
    """`sha256:<hex>` of the version's MANIFEST.json (which digests every file) at scan time."""
    content_digest: str = ""
    """`sha256:<hex>` tree digest of exactly the files scanned (scan outputs excluded)."""
    verdict: Literal["admitted", "rejected"]
    scanned: bool = True
    """False only when `leakage.enabled` is off (admitted unscanned)."""
    index_digest: str
    index_counts: dict[str, int]
    files_scanned: int = Field(ge=0)
    binary_files: int = Field(ge=0)
    """Files that are not UTF-8 text: only their relative path is scanned."""
    rows_scanned: int = Field(ge=0)
    rows_flagged: int = Field(ge=0)
    rows_omitted: int = Field(0, ge=0)
    """Flagged rows beyond `max_report_rows` (counted in the totals, not listed in `findings`)."""
    hits_by_kind: dict[str, int]
    rows_by_kind: dict[str, int]
    similarity: SimilarityAudit
    findings: list[RowFindings]
    settings: dict[str, Any]
    scanned_at: str


class ReportBuilder:
    """Accumulates row scans of one version and builds the `LeakageReport`."""

    def __init__(self, config: LeakageConfig) -> None:
        self.config = config
        self.rows = 0
        self.files = 0
        self.binary_files = 0
        self.hits = dict.fromkeys(FINDING_KINDS, 0)
        self.rows_by_kind = dict.fromkeys(FINDING_KINDS, 0)
        self.similarities: list[float] = []
        self.flagged: list[RowFindings] = []
        self.omitted = 0

    def add(self, row_id: str, file: str, line: int | None, scan: RowScan, count: bool = True) -> None:
        """Record one scanned row (flagged rows keep at most `max_findings_per_row` findings); `count=False`
        records findings of a pseudo-row (a file name) without counting it as a row."""
        self.rows += count
        if count and scan.texts_checked:
            self.similarities.append(scan.max_similarity)
        if not scan.findings:
            return
        for kind in {f.kind for f in scan.findings}:
            self.rows_by_kind[kind] += 1
        for finding in scan.findings:
            self.hits[finding.kind] += 1
        if len(self.flagged) >= self.config.max_report_rows:
            self.omitted += 1
            return
        cap = self.config.max_findings_per_row
        self.flagged.append(
            RowFindings(
                row_id=row_id,
                file=file,
                line=line,
                findings=scan.findings[:cap],
                dropped=max(0, len(scan.findings) - cap),
                max_similarity=round(scan.max_similarity, 4),
            )
        )

    def build(self, bank_version: str, index_digest: str, index_counts: dict[str, int]) -> LeakageReport:
        """The report; verdict is "admitted" exactly when no row was flagged."""
        return LeakageReport(
            bank_version=bank_version,
            verdict="rejected" if self.flagged or self.omitted else "admitted",
            index_digest=index_digest,
            index_counts=index_counts,
            files_scanned=self.files,
            binary_files=self.binary_files,
            rows_scanned=self.rows,
            rows_flagged=len(self.flagged) + self.omitted,
            rows_omitted=self.omitted,
            hits_by_kind=self.hits,
            rows_by_kind=self.rows_by_kind,
            similarity=similarity_audit(self.similarities, self.config),
            findings=self.flagged,
            settings=self.config.model_dump(mode="json"),
            scanned_at=_now(),
        )


def similarity_audit(values: list[float], config: LeakageConfig) -> SimilarityAudit:
    """Histogram (bins of 0.1) and quantiles of per-row maximum similarities."""
    data = np.asarray(values, dtype=float)
    counts, _ = np.histogram(data, bins=np.asarray(HISTOGRAM_EDGES))
    histogram = [
        HistogramBin(lo=HISTOGRAM_EDGES[i], hi=HISTOGRAM_EDGES[i + 1], count=int(counts[i])) for i in range(len(counts))
    ]
    if data.size:
        q = np.quantile(data, [0.5, 0.9, 0.99])
        quantiles = {"p50": float(q[0]), "p90": float(q[1]), "p99": float(q[2]), "max": float(data.max())}
    else:
        quantiles = {"p50": 0.0, "p90": 0.0, "p99": 0.0, "max": 0.0}
    return SimilarityAudit(
        shingle_size=config.shingle_size,
        jaccard_threshold=config.jaccard_threshold,
        audit_floor=config.audit_floor,
        rows_with_text=int(data.size),
        histogram=histogram,
        quantiles={k: round(v, 4) for k, v in quantiles.items()},
        rows_at_or_above_threshold=int((data >= config.jaccard_threshold).sum()),
    )


def unscanned_report(bank_version: str, config: LeakageConfig) -> LeakageReport:
    """The report written when the preflight is disabled: admitted, `scanned=False`, no counts."""
    builder = ReportBuilder(config)
    report = builder.build(bank_version, index_digest="", index_counts={})
    return report.model_copy(update={"scanned": False})


def write_verdict(bank_dir: Path, report: LeakageReport) -> Path:
    """Write `leakage.json`; when admitted write `ADMITTED` last (and drop a stale `REJECTED.json`),
    otherwise remove any `ADMITTED` first and write `REJECTED.json` with the counts by kind."""
    files = BankVersionLayout(Path(bank_dir))
    admitted, rejected = files.admitted_marker, files.rejected_marker
    summary = {
        "verdict": report.verdict,
        "index_digest": report.index_digest,
        "manifest_digest": report.manifest_digest,
        "content_digest": report.content_digest,
        "rows_scanned": report.rows_scanned,
        "rows_flagged": report.rows_flagged,
        "hits_by_kind": {k: v for k, v in report.hits_by_kind.items() if v},
        "scanned": report.scanned,
        "at": report.scanned_at,
    }
    if report.verdict != "admitted":
        admitted.unlink(missing_ok=True)
    path = atomic_write_json(files.leakage_report, report)
    if report.verdict == "admitted":
        rejected.unlink(missing_ok=True)
        atomic_write_json(admitted, summary)
    else:
        atomic_write_json(rejected, summary)
    return path


def read_report(bank_dir: Path) -> LeakageReport | None:
    """The version's leakage report, or None when it was never scanned."""
    path = BankVersionLayout(Path(bank_dir)).leakage_report
    if not path.exists():
        return None
    return LeakageReport.model_validate(read_json(path))


def is_admitted(bank_dir: Path) -> bool:
    """Whether the version is admitted (`BankVersionLayout.is_admitted`, the one rule: its ADMITTED marker)."""
    return BankVersionLayout(Path(bank_dir)).is_admitted()


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
