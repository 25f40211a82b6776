"""Phase "scan": leakage preflight of the newest complete bank version (reads the bank version and the
held-out fingerprint index; writes `leakage.json` and `ADMITTED` or `REJECTED.json` in that version).

A rejected version raises `LeakageRejected` (when `leakage.fail_on_reject`), so nothing downstream starts;
rounds keep pinning the previous admitted version.
"""

from __future__ import annotations

from bat.leakage.preflight import LeakageRejected, index_dir, report_path, scan_and_admit
from bat.phase.context import PhaseContext, PhaseResult
from bat.phase.spec import Maybe, PhaseSpec, first_bank
from bat.state.layout import RunLayout


def newest_complete_version(layout: RunLayout) -> int:
    """The newest bank version with a MANIFEST.json; raises listing the versions on disk when none is."""
    complete = layout.complete_bank_versions()
    if not complete:
        raise FileNotFoundError(
            f"no complete bank version (with MANIFEST.json) under {layout.bank_root}; versions on disk: "
            f"{layout.bank_versions()}; run the synthesize phase first"
        )
    return complete[-1]


def run_scan(ctx: PhaseContext) -> PhaseResult:
    """Scan the newest complete bank version and admit or reject it (see module docstring)."""
    version = newest_complete_version(ctx.layout)
    report = scan_and_admit(ctx.layout, version, ctx.config)
    files = ctx.layout.bank_version(version)
    path = report_path(ctx.layout, version)
    marker = files.admitted_marker if report.verdict == "admitted" else files.rejected_marker
    if report.verdict == "rejected" and ctx.config.leakage.fail_on_reject:
        raise LeakageRejected(report, path)
    inputs = [files.manifest]
    if report.scanned:
        inputs.append(index_dir(ctx.layout, ctx.config))
    counts: dict[str, int | float] = {
        "bank_version": version,
        "admitted": int(report.verdict == "admitted"),
        "rows_scanned": report.rows_scanned,
        "rows_flagged": report.rows_flagged,
        "files_scanned": report.files_scanned,
        "max_similarity": report.similarity.quantiles["max"],
    }
    counts.update({f"hits_{kind}": n for kind, n in report.hits_by_kind.items()})
    return PhaseResult(
        outputs=[path, marker],
        inputs=inputs,
        counts=counts,
        extra={"verdict": report.verdict, "scanned": report.scanned, "index_digest": report.index_digest},
    )


SCAN = PhaseSpec(
    "scan",
    run_scan,
    reads=lambda L, r: (first_bank(L).path, L.fingerprint_meta, L.fingerprint_entries),
    writes=lambda L, r: (
        first_bank(L).leakage_report,
        Maybe(first_bank(L).admitted_marker, "the bank is admitted"),
        Maybe(first_bank(L).rejected_marker, "the bank is rejected"),
    ),
    resources="scan",
)
