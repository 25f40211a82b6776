"""The experiment report's tables of individual runs: every arm x seed (status, Overall, counts, training signal,
route, provenance), the training signal per RL round and pool, and the superseded runs.

Reads the collected results (`bat.schemas.experiment_results.ExperimentResults`); returns markdown lines; writes no
files.
"""

from __future__ import annotations

from typing import Any

from bat.config.curriculum import POOL_NAMES
from bat.evaluate.aggregate import pct
from bat.experiment.markdown import table_head
from bat.perf.machine import isa_kind
from bat.schemas.experiment import PoolSignal, SeedRun
from bat.schemas.experiment_results import ExperimentResults


def _count(value: Any) -> str:
    """A count read back from DONE.json (ints may come back as floats); '-' when absent."""
    return "-" if value is None else str(int(value))


def runs_table(results: ExperimentResults) -> list[str]:
    """One row per arm x seed: status, Overall, final round, rollouts, reward and identical groups by round, error."""
    out = [
        "",
        "## Every run",
        "",
        "Training signal per RL round: mean reward of the round's rollouts, and GRPO groups whose K rewards were "
        "all equal (zero advantage, no gradient) out of all groups.",
        "",
        *table_head(
            ["arm", "seed", "status", "Overall", "final round", "rollouts", "train reward by round", "identical groups"]
            + ["route by round (KL)", "wall s", "from", "error"]
        ),
    ]
    for name, arm in results.arms.items():
        for x in arm.seeds:
            overall = x.aggregate.overall if x.aggregate else None
            err = (x.error or "").replace("|", "/")[:120]
            rewards, same = _signal_cells(x)
            counted = "rollouts" in x.model_fields_set
            out.append(
                f"| {name} | {x.seed} | {x.status} | {pct(overall)} | "
                f"{_field(x, 'final_round')} | {x.rollouts if counted else '-'} | {rewards or '-'} | {same or '-'} | "
                f"{route_cells(x) or '-'} | {_field(x, 'wall_s')} | {_provenance(x)} | {err} |"
            )
    return out


def _field(seed_run: SeedRun, name: str) -> Any:
    """A field of the run as the table shows it: its value where the record holds the key, else '-'."""
    return getattr(seed_run, name) if name in seed_run.model_fields_set else "-"


def _signal_cells(seed_run: SeedRun) -> tuple[str, str]:
    """(train reward by round, identical groups by round) of an arm x seed, rounds joined by ' / '."""
    signal = seed_run.signal
    rewards = " / ".join("-" if s.reward_mean is None else f"{s.reward_mean:.3f}" for s in signal)
    same = " / ".join(f"{_count(s.groups_identical)}/{_count(s.groups)}" for s in signal)
    return rewards, same


def route_cells(seed_run: SeedRun) -> str:
    """The route's action on each RL round's candidate with the KL it measured (`continue (0.026) / fallback
    (0.136)`), rounds joined by ' / '; '-' for a round recorded without them (records made before they were kept)."""
    cells = []
    for s in seed_run.signal:
        if s.route is None:
            cells.append("-")
        else:
            cells.append(s.route + ("" if s.kl is None else f" ({s.kl:.3f})"))
    return " / ".join(cells)


def superseded_table(results: ExperimentResults) -> list[str]:
    """Arm x seeds rerun under a later change: their numbers, who superseded them and why (never in the table)."""
    records = results.superseded
    if not records:
        return []
    out = [
        "",
        "## Superseded runs",
        "",
        "Arm x seeds that were run again after a change (`bat experiment --supersede TAG --reason ...`); kept as "
        "measured, listed here, never merged into the tables above.",
        "",
        *table_head(
            ["tag", "arm", "seed", "Overall (final)", "Overall (test)", "train reward by round", "identical groups"]
            + ["run at", "superseded by", "reason"]
        ),
    ]
    for x in records:
        why = x.superseded
        test = x.aggregates.get("test")
        rewards, same = _signal_cells(x)
        reason = (why.reason if why else "").replace("|", "/")
        out.append(
            f"| {why.tag if why else '?'} | {x.arm or '?'} | {x.seed} | "
            f"{pct(x.aggregate.overall if x.aggregate else None)} | {pct(test.overall if test else None)} | "
            f"{rewards or '-'} | {same or '-'} | `{(x.commit or '?')[:7]}` | `{(why.by_commit if why else '?')[:7]}` | "
            f"{reason} |"
        )
    return out


def _provenance(seed_run: SeedRun) -> str:
    """Where an arm x seed's numbers come from: this disk's state, or a committed piece (its commit and CPU kind),
    and the held-out suite it was evaluated on where recorded (the secret's fingerprint, first 8 hex)."""
    suite = f", suite `{seed_run.heldout_suite[:8]}`" if seed_run.heldout_suite else ""
    if seed_run.source != "committed":
        return "state" + suite
    cpu = seed_run.cpu.model_dump() if seed_run.cpu else {}
    return f"piece `{(seed_run.commit or '?')[:7]}` ({isa_kind(cpu)}, {cpu.get('model', '?')}){suite}"


def pool_signal_table(results: ExperimentResults) -> list[str]:
    """One row per arm x seed x RL round: each pool's mean training reward and identical groups."""
    out = [
        "",
        "Training signal per RL round and pool: mean training reward, and identical GRPO groups out of all "
        "groups of that pool; the round's GRPO step: gradient norm before clipping (`grpo.grad_clip`) and the share "
        "of its advantage weight that does not cancel within groups under its loss aggregation "
        "(`bat.train.advantage_balance`); '-' where the record predates them.",
        "",
        *table_head(["arm", "seed", "round", *POOL_NAMES, "grad norm", "uncancelled adv"]),
    ]
    for name, arm in results.arms.items():
        for x in arm.seeds:
            for s in x.signal:
                cells = [_pool_cell(s.by_pool.get(p)) for p in POOL_NAMES]
                step = [_number(s.grad_norm), _number(s.adv_uncancelled)]
                out.append(f"| {name} | {x.seed} | {s.round} | " + " | ".join([*cells, *step]) + " |")
    return out


def _number(value: float | None) -> str:
    """A step figure to 3 decimals, '-' when the record has none."""
    return "-" if value is None else f"{value:.3f}"


def _pool_cell(stats: PoolSignal | None) -> str:
    """`mean (identical/groups same)` of one pool's round signal, `-` when the pool had no rows."""
    if stats is None or stats.reward_mean is None:
        return "-"
    return f"{stats.reward_mean:.3f} ({stats.groups_identical}/{stats.groups} same)"
