"""The arm-versus-twin study's report from its committed units (`bat experiment --config FILE --twin-report`).

Reads every committed piece under `<twin_dir>/units/` (`TwinPiece`, `bat.experiment.twin_units`), merges each arm x
seed's pieces into one `TwinUnit`, runs the pre-registered analysis (`bat.experiment.twin_analysis.analyse`) and adds
what the stopping rule needs beyond it: every probed step and the SFT's probe at step 0 count as units too, and units
that do not fit together (another probe, held-out suite or set of E2E runs) decide nothing either. A rebuilt
bootstrap with another SFT digest is reported (`notes`), as the pre-registration says. Writes
`<twin_dir>/results.json` (`TwinResults`: each criterion's value, interval and passed, None while undecided; the
missing units; per-unit descriptives; every piece's provenance) and `curves.png` (`bat.experiment.twin_plot`).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from bat.experiment.records import load_record
from bat.experiment.twin_analysis import analyse, probe_mean
from bat.experiment.twin_design import REFERENCE, TwinDesign
from bat.perf.machine import isa_kind
from bat.schemas.twin_study import TwinPiece, TwinResults, TwinUnit, UnitSource
from bat.state.atomic import atomic_write_json
from bat.state.twin_layout import TwinStudyLayout


def read_pieces(root: Path) -> list[tuple[Path, TwinPiece]]:
    """Every committed piece of the study folder `root` with its path (StateFileError naming a damaged one)."""
    return [(path, load_record(path, TwinPiece)) for path in TwinStudyLayout(root).pieces()]


def _joined(values: list[str]) -> str:
    return ", ".join(dict.fromkeys(v for v in values if v))


def cpu_line(piece: TwinPiece) -> str:
    """`<model> (<kind>: <AVX-512/AMX flags>)` of the CPU that recorded `piece`."""
    if piece.cpu is None:
        return ""
    facts = piece.cpu.model_dump()
    wide = [f for f in piece.cpu.flags if f.startswith(("avx512", "amx"))]
    return f"{piece.cpu.model} ({isa_kind(facts)}{': ' + ' '.join(wide) if wide else ''})"


def merge(pieces: list[TwinPiece]) -> list[TwinUnit]:
    """One `TwinUnit` per (arm, seed) from its pieces (train: rewards and probe; e2e: runs; reference: probe at 0 and
    runs), its provenance the pieces' commits, times and CPUs joined."""
    groups: dict[tuple[str, int], list[TwinPiece]] = {}
    for piece in pieces:
        groups.setdefault((piece.arm, piece.seed), []).append(piece)
    units = []
    for (arm, seed), group in sorted(groups.items()):
        unit = TwinUnit(
            arm=arm,
            seed=seed,
            commit=_joined([p.commit or "" for p in group]),
            date=_joined([p.recorded_at or "" for p in group]),
            cpu=_joined([cpu_line(p) for p in group]),
        )
        for p in group:
            unit.rewards = p.rewards or unit.rewards
            unit.probe = {**unit.probe, **p.probe}
            unit.probe_digest = p.probe_digest or unit.probe_digest
            unit.e2e = p.e2e or unit.e2e
        units.append(unit)
    return units


def _differing(pieces: list[TwinPiece], value, what: str) -> list[str]:
    """One line when the pieces that carry a `value` do not all carry the same one."""
    seen = {f"{p.arm} seed {p.seed} ({p.part})": value(p) for p in pieces if value(p)}
    if len(set(seen.values())) <= 1:
        return []
    return [f"the units met different {what}: " + "; ".join(f"{k}: {str(v)[:12]}" for k, v in seen.items())]


def checks(pieces: list[TwinPiece], design: TwinDesign) -> tuple[list[str], list[str]]:
    """(problems: units that cannot be compared, so nothing is decided; notes: what is reported beside)."""
    problems = _differing(pieces, lambda p: p.probe_digest, "probe states (probe digest)")
    problems += _differing(pieces, lambda p: p.heldout_suite, "held-out suites (secret fingerprint)")
    problems += _differing(pieces, lambda p: ",".join(sorted(p.e2e)), "sets of held-out E2E runs")
    notes = _differing(pieces, lambda p: p.sft_digest, "SFT checkpoints (the bootstrap was rebuilt otherwise)")
    return problems, notes


def extra_missing(units: list[TwinUnit], design: TwinDesign) -> list[str]:
    """Units the stopping rule counts that the analysis does not need: the probe at every probed step before the
    last, and the reference's probe at step 0."""
    by = {(u.arm, u.seed): u for u in units}
    missing = [
        f"{arm} seed {seed}: probe at step {step}"
        for arm in design.arms
        for seed in design.seeds
        if (arm, seed) in by
        for step in design.probe_steps[:-1]
        if step not in by[(arm, seed)].probe
    ]
    for seed in design.reference_seeds:
        unit = by.get((REFERENCE, seed))
        if unit is None or 0 not in unit.probe:
            missing.append(f"{REFERENCE} seed {seed}: probe at step 0")
    return missing


def descriptives(units: list[TwinUnit]) -> dict:
    """Per unit (`<arm> seed <s>`): probe mean x100 per step, E2E finish rate and Overall (0-100), end reasons."""
    out: dict = {"probe": {}, "finish": {}, "overall": {}, "end_reasons": {}}
    for u in units:
        key = f"{u.arm} seed {u.seed}"
        out["probe"][key] = {step: probe_mean(v) for step, v in sorted(u.probe.items())}
        if u.e2e:
            runs = list(u.e2e.values())
            overall = [r.overall for r in runs if r.overall is not None]
            out["finish"][key] = 100.0 * sum(r.finished for r in runs) / len(runs)
            out["overall"][key] = 100.0 * float(np.mean(overall)) if overall else None
            out["end_reasons"][key] = dict(sorted(Counter(r.end_reason or "?" for r in runs).items()))
    return out


def twin_report(design: TwinDesign) -> tuple[TwinResults, list[TwinUnit]]:
    """The study's results from its committed pieces, and the merged units they were computed from."""
    found = read_pieces(design.root)
    study = {*design.arms, REFERENCE}
    pieces = [p for _, p in found if p.arm in study]
    units = merge(pieces)
    result = analyse(
        units,
        arm=design.arm,
        twin=design.twin,
        reference=REFERENCE,
        seeds=design.seeds,
        steps=design.steps,
        probe_step=design.steps,
    )
    problems, notes = checks(pieces, design)
    notes += [
        f"{path}: not a unit of this study (arms {sorted(study)}): left out" for path, p in found if p.arm not in study
    ]
    missing = result.missing + extra_missing(units, design)
    complete = not missing and not problems
    criteria = result.criteria if complete else [c.model_copy(update={"passed": None}) for c in result.criteria]
    sources = [
        UnitSource(
            piece=str(path.relative_to(design.root)),
            part=p.part,
            arm=p.arm,
            seed=p.seed,
            commit=p.commit or "",
            recorded_at=p.recorded_at or "",
            cpu=cpu_line(p),
            sft_digest=p.sft_digest,
        )
        for path, p in found
    ]
    update = {
        "complete": complete,
        "missing": missing,
        "criteria": criteria,
        "problems": problems,
        "notes": notes,
        "units": sources,
        "descriptives": descriptives(units),
    }
    return result.model_copy(update=update), units


def write_twin_report(design: TwinDesign) -> tuple[TwinResults, list[Path]]:
    """Write `results.json` and `curves.png` into the study folder; returns the results and the paths written."""
    from bat.experiment.twin_plot import plot_twin

    results, units = twin_report(design)
    files = TwinStudyLayout(design.root)
    written = [atomic_write_json(files.results, results.model_dump(mode="json"))]
    written.append(plot_twin(units, design, files.curves))
    return results, written
