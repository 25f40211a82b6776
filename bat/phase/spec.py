"""What a phase declares about itself at its boundary: its function, the layout files it reads and writes, and
the resources key its job asks for. Each `bat/<pkg>/phase.py` declares its `PhaseSpec` next to its function; the
orchestrator's graph (`bat.orchestrate.graph`) lists them in the order of `bat.phase.order`.

The runner (`bat.orchestrate.runner`) checks a product phase's declared writes after its function returns: a
declared file that is not there fails the phase before its DONE.json is written. `Maybe` marks a product written
only in some cases (listed in the phase table, not checked); a plain string names what is not a file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bat.phase.context import PhaseFn
    from bat.state.bank_layout import BankVersionLayout
    from bat.state.layout import RunLayout


@dataclass(frozen=True)
class Maybe:
    """A product the phase writes only `when` something holds (not checked by the runner)."""

    path: Path
    when: str


Item = Path | str | Maybe
"""One entry of a phase's reads or writes: a layout path, a `Maybe` path, or a short phrase for what is not a file."""

Files = Callable[["RunLayout", int], tuple[Item, ...]]
"""What a phase reads or writes in round r of a run."""


@dataclass(frozen=True)
class PhaseSpec:
    """One phase: its name, function, declared reads and writes, and resources key."""

    name: str
    run: PhaseFn
    """The phase function `(ctx: PhaseContext) -> PhaseResult`."""
    reads: Files
    writes: Files
    resources: str
    """Key into `config.orchestrate.resources`."""
    writes_report: bool = False
    """The runner writes the round report (`round_NN/report.md`, report.json, plots) after this phase's function,
    as one of its outputs (route, final_test); not for a function that overrides the product's."""
    product: bool = True
    """False for a function that stands in for the product's (`orchestrate.phase_overrides`, experiment
    evaluations): its declared writes are not checked."""

    @property
    def target(self) -> str:
        """`module:function` of the phase function (what `bat phases` and the event log show)."""
        return f"{self.run.__module__}:{self.run.__qualname__}"


def first_bank(layout: RunLayout) -> BankVersionLayout:
    """The bank version the phase table names (v0001; a refresh writes the next version the same way)."""
    return layout.bank_version(1)


def checked_paths(items: Iterable[Item]) -> list[Path]:
    """The declared paths a finished phase must have written (plain paths; `Maybe` entries and phrases skipped)."""
    return [item for item in items if isinstance(item, Path)]


def missing_writes(spec: PhaseSpec, layout: RunLayout, round_index: int) -> list[Path]:
    """Declared writes of `spec` in round `round_index` that do not exist; [] for a stand-in function."""
    if not spec.product:
        return []
    return [path for path in checked_paths(spec.writes(layout, round_index)) if not path.exists()]
