"""Run one phase function and mark it complete: DONE.json is written last; a DONE phase is a no-op.

Reads: the phase's inputs (whatever its function reads). Writes: `round_NN/<phase>/DONE.json`
(via `bat.state.markers.write_done`) plus event lines; the phase function writes everything else. A product
phase that did not write a file its `PhaseSpec` declares fails (`PhaseOutputMissing`) and gets no DONE.json.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from bat.orchestrate.graph import PhaseSpec, resolve_table
from bat.phase.context import PhaseContext, PhaseResult
from bat.phase.events import log_event
from bat.phase.spec import missing_writes
from bat.state.layout import RunLayout
from bat.state.markers import read_done, write_done

if TYPE_CHECKING:
    from bat.config.root import BatConfig


class PhaseOutputMissing(RuntimeError):
    """A phase function returned without writing a file its `PhaseSpec` declares."""


def global_rank() -> int:
    """Rank of this process inside a multi-task submitit job (0 outside submitit or for single tasks)."""
    import submitit

    try:
        return int(submitit.JobEnvironment().global_rank)
    except RuntimeError:  # not inside a submitit job
        return 0


def run_phase(
    config: BatConfig,
    layout: RunLayout,
    round_index: int,
    phase: str,
    table: dict[str, PhaseSpec] | None = None,
) -> PhaseResult | None:
    """Call the phase function for (round, phase) and write its DONE.json; None when already DONE."""
    from bat.config.load import config_hash
    from bat.phase.guard import guard_phase

    table = table or resolve_table(config)
    if phase not in table:
        raise KeyError(f"unknown phase {phase!r}; valid: {sorted(table)}")
    ctx = PhaseContext(config=config, layout=layout, round=round_index, phase=phase)
    if read_done(ctx.phase_dir) is not None:
        log_event(layout, round_index, phase, "already DONE, nothing to do")
        return None
    spec = table[phase]
    ctx.phase_dir.mkdir(parents=True, exist_ok=True)
    log_event(layout, round_index, phase, f"start ({spec.target})")
    started = time.perf_counter()
    with guard_phase(ctx):  # training phases fail loudly if they touch the held-out side
        result = spec.run(ctx)
        if not isinstance(result, PhaseResult):
            raise TypeError(f"phase {phase} ({spec.target}) returned {type(result).__name__}, not PhaseResult")
        if spec.writes_report:
            from bat.report.round_report import write_round_report  # 3.7 s of imports (scipy, matplotlib)

            result.outputs.extend(write_round_report(layout, round_index, config))
    elapsed = time.perf_counter() - started
    if global_rank() == 0:
        missing = missing_writes(spec, layout, round_index)
        if missing:
            raise PhaseOutputMissing(
                f"phase {phase} ({spec.target}) finished without writing what it declares: "
                + ", ".join(str(p) for p in missing)
                + "; no DONE.json written (a bug in the phase or in its PhaseSpec)"
            )
        extra = {**result.extra, "compute_s": round(elapsed, 3)}
        write_done(
            ctx.phase_dir,
            phase=phase,
            config_hash=config_hash(config),
            round_index=round_index,
            inputs=result.inputs,
            outputs=result.outputs,
            counts=result.counts,
            extra=extra,
            run_root=layout.root,
        )
        log_event(layout, round_index, phase, f"DONE in {elapsed:.2f}s counts={result.counts}")
    return result
